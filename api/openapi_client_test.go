package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestOpenAPIGeneratedClient generates a TypeScript client description from the
// committed document with openapi-typescript, type-checks openapitest/client.ts
// against it with tsc, and runs the compiled program against a live service:
// list wallets, create one, an intra transfer, and two refusals in the error
// shape. A document that disagrees with the service or with tsc fails here.
func TestOpenAPIGeneratedClient(t *testing.T) {
	t.Parallel()
	harness := openapiHarness(t)
	work := t.TempDir()
	if err := os.Symlink(filepath.Join(harness, "node_modules"), filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"client.ts", "tsconfig.json"} {
		b, err := os.ReadFile(filepath.Join(harness, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	document, err := filepath.Abs("openapi/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(harness, "node_modules", ".bin")
	npmRun(t, work, filepath.Join(bin, "openapi-typescript"), document, "-o", "paysvc.ts")
	npmRun(t, work, filepath.Join(bin, "tsc"), "-p", "tsconfig.json")

	f := sdkStart(t, "100.00")
	label := fmt.Sprintf("TS-CLIENT-%d", time.Now().UnixNano())
	res := f.script(t, work, []string{"node", "dist/client.js"}, map[string]string{"PAYSVC_LABEL": label})
	outcome := func(name string) (status int, data map[string]any, errBody map[string]any) {
		t.Helper()
		var o struct {
			Status int            `json:"status"`
			Data   map[string]any `json:"data"`
			Error  map[string]any `json:"error"`
		}
		if err := json.Unmarshal(res[name], &o); err != nil {
			t.Fatalf("%s: %v in %s", name, err, res[name])
		}
		return o.Status, o.Data, o.Error
	}
	if status, data, _ := outcome("list"); status != 200 || data["count"] == nil {
		t.Errorf("list: %d %v", status, data)
	}
	status, created, _ := outcome("create")
	if status != 201 || created["label"] != label || created["wallet_type"] != "WORKING" || created["available_balance"] != "0.00" {
		t.Errorf("create: %d %v", status, created)
	}
	status, tr, _ := outcome("transfer")
	origin, _ := tr["origin"].(map[string]any)
	dest, _ := tr["destination"].(map[string]any)
	if status != 200 || origin["wallet_id"] != f.settlement || origin["available_balance"] != "90.00" ||
		dest["wallet_id"] != created["wallet_id"] || dest["available_balance"] != "10.00" {
		t.Errorf("transfer: %d %v", status, tr)
	}
	for name, want := range map[string]struct {
		status int
		code   string
	}{"insufficient": {400, "insufficient_funds"}, "missing": {404, "not_found"}} {
		status, data, e := outcome(name)
		var code any
		if errs, _ := e["errors"].([]any); len(errs) > 0 {
			first, _ := errs[0].(map[string]any)
			code = first["code"]
		}
		if status != want.status || data != nil || e["detail"] == nil || e["request_id"] == nil || code != want.code {
			t.Errorf("%s: %d, data %v, error %v; want %d %s in the error shape", name, status, data, e, want.status, want.code)
		}
	}
	var balance string
	if err := json.Unmarshal(res["balance"], &balance); err != nil || balance != "10.00" {
		t.Errorf("balance after the transfer: %s (%v), want 10.00", res["balance"], err)
	}
}

// openapiHarness is api/openapitest with its pinned packages installed.
func openapiHarness(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH (%v): the generated-client test needs it", err)
	}
	dir, err := filepath.Abs("openapitest")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"openapi-typescript", "typescript", "openapi-fetch"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			t.Fatalf("%s is not installed in %s (%v): run `make sdk`", pkg, dir, err)
		}
	}
	return dir
}

// npmRun runs one of the harness's tools in dir and fails with its output.
func npmRun(t *testing.T, dir string, argv ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(argv[0]), err, out)
	}
}
