package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"paysvc/actors/values/waittest"
	"paysvc/storage/storagetest"
)

// TestProgressOnStderr: migrate and ledger check say on stderr what they do as
// they go, and stdout stays the one JSON result.
func TestProgressOnStderr(t *testing.T) {
	t.Parallel()
	t.Run("migrate_names_each_migration_and_function_file", func(t *testing.T) {
		t.Parallel()
		s := storagetest.New(t)
		exec(t, s.DB, fmt.Sprintf(`DROP SCHEMA %s CASCADE; CREATE SCHEMA %[1]s`, s.Name))
		r := runCLI(t, envFor(s), "migrate")
		if r.err != nil {
			t.Fatalf("migrate: %v", r)
		}
		decodeOne(t, r.stdout, "applied")
		for _, re := range []string{
			`(?m)^applying 0001_init \.\.\. done in \d`,
			`(?m)^applying 0065_webhook_previous_signing_secret \.\.\. done in \d`,
			`(?m)^applying functions/\S+\.sql \.\.\. done in \d`,
		} {
			if !regexp.MustCompile(re).MatchString(r.stderr) {
				t.Errorf("stderr lacks %s:\n%s", re, r.stderr)
			}
		}
		again := runCLI(t, envFor(s), "migrate")
		if strings.Contains(again.stderr, "applying") {
			t.Errorf("a migrated schema's migrate says it applies something:\n%s", again.stderr)
		}
	})
	t.Run("ledger_check_says_what_it_checks", func(t *testing.T) {
		t.Parallel()
		s := storagetest.New(t)
		createMerchant(t, s)
		r := runCLI(t, envFor(s), "ledger", "check")
		if r.err != nil {
			t.Fatalf("ledger check: %v", r)
		}
		decodeOne(t, r.stdout)
		for _, re := range []string{
			`(?m)^currencies summed: \d+ currencies, \d+ entries, in \d`,
			`(?m)^wallets compared: 1 of 1, 0 mismatches, 0 negative, in \d`,
			`(?m)^holds compared: 0 mismatches, in \d`,
			`(?m)^ledger check done in \S+: ok true$`,
		} {
			if !regexp.MustCompile(re).MatchString(r.stderr) {
				t.Errorf("stderr lacks %s:\n%s", re, r.stderr)
			}
		}
	})
}

// TestProgressHeartbeat: a step that runs long shows its elapsed time while it
// runs, and its "done" line finishes the same line.
func TestProgressHeartbeat(t *testing.T) {
	t.Parallel()
	var w syncBuffer
	p := newProgress(&w)
	p.tick = 10 * time.Millisecond
	p.line("summing ledger entries by currency ...")
	waittest.Eventually(t, 5*time.Second, func() (bool, string) {
		return len(w.String()) > len("summing ledger entries by currency ..."), w.String()
	})
	p.line("done in 1s")
	p.line("next")
	p.end()
	got := w.String()
	if !regexp.MustCompile(`^summing ledger entries by currency \.\.\.( \d+m?s)+ done in 1s\nnext\n$`).MatchString(got) {
		t.Errorf("progress wrote %q", got)
	}
}
