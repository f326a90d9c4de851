package service_test

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// opsDir is ops/ at the repository's root, from this package's directory.
const opsDir = "../../../ops"

// promtool is Debian's promtool (`make prometheus` installs it). A missing one
// fails the test: the alerts must not go untested because a tool is absent.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found on PATH: install Debian's prometheus package (`make prometheus`, " +
			"`apt-get install prometheus`); the alert rules are tested with it")
	}
	return p
}

// alertRule is one rule of alerts.yml, as far as this test reads it.
type alertRule struct {
	name, severity, runbook string
}

// alertRules reads the rules of alerts.yml: each block from `- alert:` to the
// next, with its severity label and runbook_url annotation (any YAML style).
func alertRules(t *testing.T) []alertRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(opsDir, "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	sev := regexp.MustCompile(`severity:\s*"?(\w+)`)
	url := regexp.MustCompile(`runbook_url:\s*(?:'([^']+)'|"?([^"\s}]+))`)
	var out []alertRule
	blocks := strings.Split(string(b), "- alert:")
	for _, blk := range blocks[1:] {
		r := alertRule{name: strings.Fields(blk)[0]}
		if m := sev.FindStringSubmatch(blk); m != nil {
			r.severity = m[1]
		}
		if m := url.FindStringSubmatch(blk); m != nil {
			r.runbook = m[1] + m[2]
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		t.Fatal("no rule found in alerts.yml")
	}
	return out
}

// runbookAnchors are the anchors of ops/runbooks.md's headings, as GitHub makes
// them: lower case, punctuation dropped, spaces as hyphens.
func runbookAnchors(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(opsDir, "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		anchors[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return anchors
}

// runbookBase is how every runbook_url begins: rule files read no environment,
// so the base is the external label runbook_base that prometheus.yml sets.
const runbookBase = "{{ $externalLabels.runbook_base }}/ops/runbooks.md#"

// runbookBases are the values of runbook_base in the Prometheus configurations
// and in the promtool tests (which have no prometheus.yml), by file.
func runbookBases(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(opsDir, "prometheus", "tests", "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(opsDir, "prometheus", "prometheus.yml"), filepath.Join(opsDir, "prometheus", "local.yml"))
	base := regexp.MustCompile(`runbook_base:\s*"?([^"\s}]+)`)
	out := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = nil
		for _, m := range base.FindAllStringSubmatch(string(b), -1) {
			out[filepath.Base(f)] = append(out[filepath.Base(f)], m[1])
		}
	}
	return out
}

// Every rule pages or makes a ticket and links, by an absolute URL, to a runbook
// section that exists.
func TestAlertRulesSeverityAndRunbook(t *testing.T) {
	t.Parallel()
	anchors := runbookAnchors(t)
	for _, r := range alertRules(t) {
		if r.severity != "page" && r.severity != "ticket" {
			t.Errorf("%s: severity %q, want page or ticket", r.name, r.severity)
		}
		anchor, ok := strings.CutPrefix(r.runbook, runbookBase)
		if !ok {
			t.Errorf("%s: runbook_url %q, want %s<section>", r.name, r.runbook, runbookBase)
			continue
		}
		if !anchors[anchor] {
			t.Errorf("%s: runbook_url %q: ops/runbooks.md has no section #%s", r.name, r.runbook, anchor)
		}
	}
	// The base makes the URL absolute wherever the rules are evaluated.
	for file, bases := range runbookBases(t) {
		if len(bases) == 0 {
			t.Errorf("%s: no external label runbook_base: its alerts' runbook_url would be relative", file)
		}
		for _, b := range bases {
			u, err := url.Parse(b)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.HasSuffix(b, "/") {
				t.Errorf("%s: runbook_base %q, want an absolute http(s) URL without a trailing slash", file, b)
			}
		}
	}
}

// promtool checks the rules and runs ops/prometheus/tests/*.yml, in which every
// alert fires in the situation it names (with its severity) and stays quiet on
// healthy series, busy or idle (healthy.yml).
func TestAlertRulesPromtool(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	dir := filepath.Join(opsDir, "prometheus")
	if out, err := exec.Command(bin, "check", "rules", filepath.Join(dir, "alerts.yml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	files, err := filepath.Glob(filepath.Join(dir, "tests", "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no promtool tests in %s/tests: %v", dir, err)
	}
	if out, err := exec.Command(bin, append([]string{"test", "rules"}, files...)...).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}

	// Every alert has a case where it fires and a healthy case where it does not.
	firing := regexp.MustCompile(`alertname:\s*(\w+)\s*\n\s*exp_alerts:\s*\n\s*- exp_labels:`)
	quiet := regexp.MustCompile(`alertname:\s*(\w+)\s*\n\s*exp_alerts:\s*\[\]`)
	fires, healthy := map[string]bool{}, map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range firing.FindAllStringSubmatch(string(b), -1) {
			fires[m[1]] = true
		}
		if filepath.Base(f) == "healthy.yml" {
			for _, m := range quiet.FindAllStringSubmatch(string(b), -1) {
				healthy[m[1]] = true
			}
		}
	}
	var names []string
	for _, r := range alertRules(t) {
		if !slices.Contains(names, r.name) {
			names = append(names, r.name)
		}
	}
	for _, n := range names {
		if !fires[n] {
			t.Errorf("%s: no promtool test in which it fires", n)
		}
		if !healthy[n] {
			t.Errorf("%s: not checked quiet in tests/healthy.yml", n)
		}
	}
}
