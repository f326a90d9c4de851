// Package grafana_test checks the Grafana dashboards of ops/grafana/dashboards.
// Grafana itself is not run here (it cannot be downloaded): every panel's
// queries are run against Debian's prometheus scraping a real service instead,
// which checks what the panels would show, not how Grafana renders them.
package grafana_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// pendingMetrics are metrics a panel shows that another branch defines (the
// ledger audit and the PROCESSING watch of the alerts work). Until a scrape shows
// them, their panels are reported and skipped; once it does, the test asks for
// their removal here, so that they are checked like every other panel.
var pendingMetrics = map[string]bool{}

// eventOnlyMetrics are exported only once their event happens, because their
// labels cannot be known in advance; their panels add `or vector(0)`. The test's
// traffic does not make them, so their names are checked against the source.
var eventOnlyMetrics = map[string]string{
	"paysvc_engine_commands_quarantined_total": "type and code (a SQLSTATE) are open-ended",
}

// builtinMetrics are series Prometheus makes itself rather than scrapes.
var builtinMetrics = map[string]bool{"up": true}

type target struct {
	RefID      string         `json:"refId"`
	Expr       string         `json:"expr"`
	Datasource map[string]any `json:"datasource"`
}

type panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Desc        string         `json:"description"`
	Datasource  map[string]any `json:"datasource"`
	Targets     []target       `json:"targets"`
	GridPos     map[string]int `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
}

// panelUnits are the Grafana units the panels use; a custom "suffix: X" (the
// currency of a money panel, in major units) is accepted too. An unknown name
// would show the bare number, as no unit does.
var panelUnits = map[string]bool{
	"s": true, "ms": true, "reqps": true, "ops": true, "opm": true, "percentunit": true,
	"bytes": true, "short": true, "none": true,
}

type variable struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Datasource map[string]any `json:"datasource"`
	Definition string         `json:"definition"`
	Query      struct {
		Query string `json:"query"`
	} `json:"query"`
}

type dashboard struct {
	file       string
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

func loadDashboards(t *testing.T) []dashboard {
	t.Helper()
	files, err := filepath.Glob("dashboards/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in ops/grafana/dashboards: %v", err)
	}
	var out []dashboard
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s is not JSON: %v", f, err)
		}
		d.file = filepath.Base(f)
		out = append(out, d)
	}
	return out
}

// selectorRE finds a metric selector with its matchers: name{...}.
var selectorRE = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}`)

// metricNames are the metric names an expression selects.
func metricNames(expr string) []string {
	var out []string
	for _, m := range selectorRE.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1])
	}
	return out
}

// concrete is an expression as Grafana would send it with every variable at All
// (a 5 m rate window: long enough that the busy phase's checks still see the
// traffic on a slow machine).
func concrete(expr string) string {
	return strings.NewReplacer(`$instance`, `.*`, `$role`, `.*`, `$__rate_interval`, `5m`, `$__interval`, `5m`).Replace(expr)
}

// TestDashboardsWellFormed checks every dashboard's shape without a service: JSON,
// unique uids, the instance and role variables, and every panel with a title, the
// provisioned datasource and targets whose every selector honours both variables.
func TestDashboardsWellFormed(t *testing.T) {
	t.Parallel()
	ds, err := os.ReadFile("provisioning/datasources/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*uid:\s*(\S+)\s*$`).FindSubmatch(ds)
	if m == nil {
		t.Fatal("provisioning/datasources/prometheus.yml names no uid")
	}
	dsUID := string(m[1])
	// Compose mounts what is checked here where the provider reads it.
	compose, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	prov, err := os.ReadFile("provisioning/dashboards/paysvc.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(compose, []byte("./ops/grafana/dashboards:/var/lib/grafana/dashboards")) ||
		!bytes.Contains(compose, []byte("./ops/grafana/provisioning:/etc/grafana/provisioning")) ||
		!bytes.Contains(prov, []byte("path: /var/lib/grafana/dashboards")) {
		t.Error("docker-compose.yml's grafana volumes and provisioning/dashboards/paysvc.yml's path no longer meet")
	}

	uids := map[string]string{}
	panels := 0
	for _, d := range loadDashboards(t) {
		if d.UID == "" || d.Title == "" {
			t.Errorf("%s: uid %q, title %q", d.file, d.UID, d.Title)
		}
		if other, dup := uids[d.UID]; dup {
			t.Errorf("%s and %s share uid %s", d.file, other, d.UID)
		}
		uids[d.UID] = d.file
		vars := map[string]variable{}
		for _, v := range d.Templating.List {
			vars[v.Name] = v
		}
		for _, name := range []string{"instance", "role"} {
			v, ok := vars[name]
			if !ok || v.Type != "query" || !strings.HasPrefix(v.Query.Query, "label_values(") || v.Datasource["uid"] != dsUID {
				t.Errorf("%s: variable %s missing or not a label_values query of datasource %s: %+v", d.file, name, dsUID, v)
			}
		}
		if len(d.Panels) == 0 {
			t.Errorf("%s has no panels", d.file)
		}
		ids := map[int]bool{}
		for _, p := range d.Panels {
			panels++
			where := fmt.Sprintf("%s panel %d %q", d.file, p.ID, p.Title)
			if p.Title == "" || p.Desc == "" || p.Type == "" || ids[p.ID] || p.GridPos["w"] == 0 || p.GridPos["h"] == 0 {
				t.Errorf("%s: needs a title, a description (what it answers), a type, a unique id and a size", where)
			}
			ids[p.ID] = true
			if u := p.FieldConfig.Defaults.Unit; !panelUnits[u] && !strings.HasPrefix(u, "suffix:") {
				t.Errorf("%s: unit %q: every panel says what its numbers count (fieldConfig.defaults.unit: s, reqps, ops, percentunit, short, none, suffix: KES...)", where, u)
			}
			if p.Datasource["uid"] != dsUID || p.Datasource["type"] != "prometheus" {
				t.Errorf("%s: datasource %v, want the provisioned prometheus %s", where, p.Datasource, dsUID)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: no targets", where)
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" || tg.RefID == "" {
					t.Errorf("%s: target without expr or refId", where)
				}
				sels := selectorRE.FindAllStringSubmatch(tg.Expr, -1)
				if len(sels) == 0 {
					t.Errorf("%s: %s selects no metric", where, tg.Expr)
				}
				for _, s := range sels {
					if !strings.Contains(s[2], `instance=~"$instance"`) || !strings.Contains(s[2], `role=~"$role"`) {
						t.Errorf("%s: selector %s ignores the instance or role variable", where, s[0])
					}
				}
			}
		}
	}
	if panels < 60 {
		t.Errorf("%d panels in all: a dashboard went missing?", panels)
	}
}

// prom is Debian's prometheus running as a process of the test.
type prom struct {
	t    *testing.T
	base string
	logs *bytes.Buffer
}

// startPrometheus runs prometheus scraping target every second, labelled as a
// process of every role (servicetest.Start runs them all in one).
func startPrometheus(t *testing.T, target string) *prom {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed: `make prometheus` installs Debian's package (the dashboards are checked against it)")
	}
	// prometheus cannot listen on port 0 and report the port: take a free one.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: paysvc
    static_configs:
      - targets: [%q]
        labels: {role: "api,engine,relay,rails,dispatcher"}
`, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--web.listen-address="+addr,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus logs:\n%s", logs)
		}
	})
	p := &prom{t: t, base: "http://" + addr, logs: logs}
	err = waittest.Wait(30*time.Second, func() (bool, string) {
		resp, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
	if err != nil {
		t.Fatalf("prometheus not ready on %s: %v\n%s", addr, err, logs)
	}
	return p
}

type sample struct {
	labels map[string]string
	value  float64
}

// api calls prometheus's HTTP API and decodes data into v.
func (p *prom) api(path string, params url.Values, v any) error {
	resp, err := http.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s: %d, undecodable: %w", path, resp.StatusCode, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s: %s", path, body.ErrorType, body.Error)
	}
	return json.Unmarshal(body.Data, v)
}

// query runs an instant query and returns its samples (a scalar is one sample).
func (p *prom) query(expr string) ([]sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.api("/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	parse := func(v [2]any) (float64, error) {
		s, _ := v[1].(string)
		return strconv.ParseFloat(s, 64)
	}
	switch data.ResultType {
	case "vector":
		var rs []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(data.Result, &rs); err != nil {
			return nil, err
		}
		out := make([]sample, 0, len(rs))
		for _, r := range rs {
			f, err := parse(r.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, sample{labels: r.Metric, value: f})
		}
		return out, nil
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(data.Result, &v); err != nil {
			return nil, err
		}
		f, err := parse(v)
		return []sample{{value: f}}, err
	}
	return nil, fmt.Errorf("result type %s: a panel needs a vector or a scalar", data.ResultType)
}

// showsNumber is the panel check: the expression parses, and returns at least
// one sample that is a number (NaN and infinities draw nothing either).
func (p *prom) showsNumber(expr string) error {
	ss, err := p.query(expr)
	if err != nil {
		return err
	}
	for _, s := range ss {
		if !math.IsNaN(s.value) && !math.IsInf(s.value, 0) {
			return nil
		}
	}
	return fmt.Errorf("No data: %d samples, none a number", len(ss))
}

// scalar is the one number expr returns (the test's own queries).
func (p *prom) scalar(expr string) (float64, error) {
	ss, err := p.query(expr)
	if err != nil {
		return 0, err
	}
	if len(ss) != 1 {
		return 0, fmt.Errorf("%s: %d samples, want 1", expr, len(ss))
	}
	return ss[0].value, nil
}

// eventually retries check until it passes or 30 s have gone (prometheus must
// scrape what the service did); a check that never passes is an error, and the
// test goes on to the next panel.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	if err := waittest.Wait(30*time.Second, func() (bool, string) {
		err := check()
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// TestDashboardsAgainstPrometheus runs every panel's every query against Debian's
// prometheus scraping a real service (all roles): on the idle service each must
// show a number, not "No data"; after a little traffic (an STK collection, a
// deposit, a transfer, payment files, webhook deliveries) the money and collection
// panels must have moved, by exactly the money that moved.
func TestDashboardsAgainstPrometheus(t *testing.T) {
	dashboards := loadDashboards(t)
	env := servicetest.Start(t, func(c *service.Config) {
		c.API.WebhookAllowPrivate = true
		c.Webhooks.Poll = 20 * time.Millisecond
		c.DBGaugesEvery = 100 * time.Millisecond
		// servicetest turns the ledger audit off (its gauges are process-wide);
		// the money dashboard's ledger panels need it running.
		c.LedgerAudit.Interval, c.LedgerAudit.FullInterval = 200*time.Millisecond, time.Hour
	})
	p := startPrometheus(t, strings.TrimPrefix(env.AdminURL, "http://"))

	// Rates need two samples in their window: wait for three scrapes.
	eventually(t, "three scrapes of the service", func() error {
		n, err := p.scalar(`sum(count_over_time(up{job="paysvc"}[1m])) and on() (sum(up{job="paysvc"}) == 1)`)
		if err != nil {
			return err
		}
		if n < 3 {
			return fmt.Errorf("%v scrapes", n)
		}
		return nil
	})
	if t.Failed() {
		t.FailNow()
	}
	exported := func() map[string]bool {
		var names []string
		if err := p.api("/api/v1/label/__name__/values", url.Values{}, &names); err != nil {
			t.Fatal(err)
		}
		set := map[string]bool{}
		for _, n := range names {
			set[n] = true
		}
		return set
	}

	// The check itself must be able to fail: a bogus panel shows "No data".
	if err := p.showsNumber(`sum(rate(paysvc_no_such_metric_total{instance=~".*",role=~".*"}[1m]))`); err == nil {
		t.Fatal("a panel of a metric nobody exports passed the No-data check")
	}
	if err := p.showsNumber(`sum(rate(paysvc_collections_total{`); err == nil {
		t.Fatal("an expression that does not parse passed the check")
	}

	idle := exported()
	checkPanels := func(phase string, names map[string]bool) {
		for _, d := range dashboards {
			for _, pn := range d.Panels {
				for _, tg := range pn.Targets {
					where := fmt.Sprintf("%s: %s %q %s", phase, d.file, pn.Title, tg.RefID)
					pending := false
					for _, n := range metricNames(tg.Expr) {
						if pendingMetrics[n] && !names[n] {
							pending = true
						}
					}
					if pending {
						t.Logf("%s: skipped until its metrics are exported (pendingMetrics)", where)
						continue
					}
					if err := p.showsNumber(concrete(tg.Expr)); err != nil {
						t.Errorf("%s would show no number: %v\n  %s", where, err, tg.Expr)
					}
				}
			}
			for _, v := range d.Templating.List {
				m := regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`).FindStringSubmatch(v.Query.Query)
				if m == nil {
					t.Errorf("%s: variable %s: %q is not label_values(selector, label)", d.file, v.Name, v.Query.Query)
					continue
				}
				var series []map[string]string
				if err := p.api("/api/v1/series", url.Values{"match[]": {concrete(m[1])}}, &series); err != nil {
					t.Errorf("%s: variable %s: %v", d.file, v.Name, err)
					continue
				}
				if len(series) == 0 || series[0][m[2]] == "" {
					t.Errorf("%s: variable %s would offer no value: %v", d.file, v.Name, series)
				}
			}
		}
	}
	checkPanels("idle", idle)

	// A little traffic on every money path.
	hits := make(chan struct{}, 100)
	okHook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		select {
		case hits <- struct{}{}:
		default:
		}
	}))
	defer okHook.Close()
	failingHook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer failingHook.Close()
	m := env.Merchant("Dash")
	auth := servicetest.Bearer(m.SecretKey)
	post := func(path string, body any, want int) map[string]any {
		t.Helper()
		r := env.Do("POST", path, body, auth...)
		if r.Status != want {
			t.Fatalf("POST %s: %d %s", path, r.Status, r.Body)
		}
		return r.Map(t)
	}
	var wallets struct {
		Results []map[string]any `json:"results"`
	}
	env.Do("GET", "/api/v1/wallets/", nil, auth...).JSON(t, &wallets)
	settlement := wallets.Results[0]["wallet_id"].(string)
	for _, hook := range []string{okHook.URL, failingHook.URL} {
		post("/api/v1/webhooks/", map[string]any{"endpoint": hook + "/hook", "challenge": "dash-secret", "wallet_transfer_event": true}, 201)
	}
	post("/api/v1/sandbox/wallets/"+settlement+"/deposit/", map[string]any{"amount": "1000.00"}, 200)
	working := post("/api/v1/wallets/", map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": "Float"}, 201)["wallet_id"].(string)
	post("/api/v1/wallets/"+settlement+"/intra_transfer/", map[string]any{"wallet_id": working, "amount": "10.00", "narrative": "dash"}, 200)
	post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254708374149", "amount": "101.00"}, 200)
	file := func(approval string) map[string]any {
		return map[string]any{"currency": "KES", "provider": "MPESA-B2C", "requires_approval": approval, "batch_reference": "dash-" + approval,
			"transactions": []map[string]any{{"account": "254708374149", "amount": "100", "name": "Jane Doe", "narrative": "Salary"}}}
	}
	post("/api/v1/send-money/initiation/", file("NO"), 201)
	post("/api/v1/send-money/initiation/", file("YES"), 201) // left awaiting approval
	select {
	case <-hits:
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook delivery arrived")
	}

	// The money counters hold exactly the money that moved, in minor units.
	for expr, want := range map[string]float64{
		`sum(paysvc_money_in_minor_total{currency="KES",rail="mpesa"})`:           10100,  // the STK collection, 101.00
		`sum(paysvc_money_in_minor_total{currency="KES",rail="sandbox_funding"})`: 100000, // the deposit, 1000.00
		`sum(paysvc_money_out_minor_total{currency="KES",rail="mpesa"})`:          10000,  // the approved file's 100.00
		`sum(paysvc_payout_files_awaiting_approval)`:                              1,
	} {
		eventually(t, expr, func() error {
			got, err := p.scalar(expr)
			if err == nil && got != want {
				err = fmt.Errorf("%v, want %v", got, want)
			}
			return err
		})
	}
	// And the panels moved: each named panel shows a sample with these labels above 0.
	moved := []struct {
		dash, title string
		labels      map[string]string
	}{
		{"paysvc-collections.json", "Collections per minute by rail and state", map[string]string{"rail": "mpesa", "state": "COMPLETE"}},
		{"paysvc-collections.json", "Completed per minute by rail", map[string]string{"rail": "mpesa"}},
		{"paysvc-collections.json", "Value collected per minute by rail (KES)", map[string]string{"rail": "mpesa"}},
		{"paysvc-money.json", "Value in per minute by currency and rail", map[string]string{"currency": "KES", "rail": "mpesa"}},
		{"paysvc-money.json", "Wallet totals by currency (current balance)", map[string]string{"currency": "KES"}},
		{"paysvc-overview.json", "Money in, KES (1h)", nil},
		{"paysvc-overview.json", "Collections completed (1h)", nil},
		{"paysvc-payouts.json", "Payout transactions per minute by provider and status", map[string]string{"provider": "MPESA-B2C", "status": "COMPLETE"}},
		{"paysvc-webhooks.json", "Delivery attempts/s by result", map[string]string{"result": "delivered"}},
		{"paysvc-webhooks.json", "Failures/s by reason", map[string]string{"reason": "http_5xx"}},
	}
	for _, mv := range moved {
		expr := ""
		for _, d := range dashboards {
			for _, pn := range d.Panels {
				if d.file == mv.dash && pn.Title == mv.title {
					expr = pn.Targets[0].Expr
				}
			}
		}
		if expr == "" {
			t.Errorf("%s has no panel %q", mv.dash, mv.title)
			continue
		}
		eventually(t, mv.dash+" "+mv.title+" moved", func() error {
			ss, err := p.query(concrete(expr))
			if err != nil {
				return err
			}
		next:
			for _, s := range ss {
				for k, v := range mv.labels {
					if s.labels[k] != v {
						continue next
					}
				}
				if s.value > 0 {
					return nil
				}
			}
			return fmt.Errorf("no sample with %v above 0: %v", mv.labels, ss)
		})
	}

	// Every metric a panel names is one the service exports (or is pending).
	busy := exported()
	checkPanels("busy", busy)
	var unknown []string
	for _, d := range dashboards {
		for _, pn := range d.Panels {
			for _, tg := range pn.Targets {
				for _, n := range metricNames(tg.Expr) {
					if _, ok := eventOnlyMetrics[n]; ok {
						if !definedInSource(t, n) {
							unknown = append(unknown, d.file+": "+n+" (no Go file defines it)")
						}
						continue
					}
					if !busy[n] && !idle[n] && !pendingMetrics[n] && !builtinMetrics[n] {
						unknown = append(unknown, d.file+": "+n)
					}
				}
			}
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("panels name metrics the service does not export:\n%s", strings.Join(unknown, "\n"))
	}
	for n := range pendingMetrics {
		if busy[n] {
			t.Errorf("%s is exported now: remove it from pendingMetrics so its panels are checked", n)
		}
	}
}

// definedInSource reports whether a Go file of the module names the metric.
func definedInSource(t *testing.T, name string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir("../..", func(path string, e os.DirEntry, err error) error {
		if err != nil || found {
			return err
		}
		if e.IsDir() && (e.Name() == "node_modules" || strings.HasPrefix(e.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found = bytes.Contains(b, []byte(`"`+name+`"`))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
