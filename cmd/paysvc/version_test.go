package main

import (
	"bytes"
	"log/slog"
	"runtime"
	"strings"
	"testing"
)

// version answers without a configuration, as help does: it is what an operator
// runs first on a box whose environment may be wrong.
func TestVersion(t *testing.T) {
	r := runCLI(t, map[string]string{"PAYSVC_DATABASE_URL": noDatabase, "PAYSVC_KAFKA_SYNC_WRITES": "not-a-boolean"}, "version")
	if r.err != nil {
		t.Fatalf("version: %v", r)
	}
	if !strings.HasPrefix(r.stdout, "paysvc ") || !strings.Contains(r.stdout, runtime.Version()) {
		t.Errorf("version printed %q, want paysvc, its module version and %s", r.stdout, runtime.Version())
	}
}

// A bad boolean stops a command and names the variable.
func TestBadBooleanStopsTheStart(t *testing.T) {
	r := runCLI(t, map[string]string{"PAYSVC_DATABASE_URL": noDatabase, "PAYSVC_KAFKA_SYNC_WRITES": "ture"}, "ledger", "check")
	if r.err == nil || !strings.Contains(r.err.Error(), "PAYSVC_KAFKA_SYNC_WRITES: not a boolean") {
		t.Fatalf("want the start refused naming PAYSVC_KAFKA_SYNC_WRITES: %v", r)
	}
}

func TestWarnUnknown(t *testing.T) {
	var buf bytes.Buffer
	warnUnknown(slog.New(slog.NewTextHandler(&buf, nil)), []string{"PAYSVC_KAFKA_SYNC_WRITE=1", "PAYSVC_DATABASE_URL=x", "PATH=/bin"})
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "level=WARN") ||
		!strings.Contains(out, "variable=PAYSVC_KAFKA_SYNC_WRITE") || !strings.Contains(out, "did_you_mean=PAYSVC_KAFKA_SYNC_WRITES") {
		t.Errorf("warnings = %q, want one line naming PAYSVC_KAFKA_SYNC_WRITE and its likely name", out)
	}
}
