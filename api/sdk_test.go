package api_test

// Wire compatibility with the official Node SDK (intasend-node@1.1.2): the real SDK,
// preloaded with sdktest/redirect.js, calls a real paysvc over HTTP. See
// sdktest/SDK-NOTES.md for what the SDK puts on the wire and why each assertion
// below matters (unframed GET bodies, 200/201-only success, empty error bodies
// that hang the caller).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paysvc/actors/money"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
)

const (
	sdkVersion = "1.1.2"
	sdkTimeout = 60 * time.Second
)

func TestNodeSDK_Wallets(t *testing.T) {
	t.Parallel()
	dir := sdkDir(t)
	f := sdkStart(t, "100.00")
	label := fmt.Sprintf("SDK-WALLET-%d", time.Now().UnixNano())

	res := f.run(t, dir, "wallets.js", map[string]string{
		"PAYSVC_SOURCE_WALLET": f.settlement,
		"PAYSVC_AMOUNT":        "10",
		"PAYSVC_LABEL":         label,
	})

	var listedSettlement map[string]any
	t.Run("List", func(t *testing.T) {
		list := sdkOK(t, res, "list")
		sdkListShape(t, list)
		rows := sdkResults(t, list)
		if list["count"] != float64(len(rows)) {
			t.Errorf("count = %v, want %d (one page of results)", list["count"], len(rows))
		}
		var found bool
		for _, w := range rows {
			if w["wallet_id"] == f.settlement {
				found, listedSettlement = true, w
				sdkWant(t, w, "wallet_type", "SETTLEMENT")
				sdkWant(t, w, "currency", "KES")
				sdkWant(t, w, "current_balance", "100.00")
			}
		}
		if !found {
			t.Errorf("list has no settlement wallet %s: %v", f.settlement, list["results"])
		}
	})

	created := sdkOK(t, res, "create")
	id, _ := created["wallet_id"].(string)
	if id == "" {
		t.Fatalf("create returned no wallet_id: %v", created)
	}

	t.Run("Create", func(t *testing.T) {
		sdkWantWallet(t, created, id, label)
		sdkWant(t, created, "current_balance", "0.00")
		sdkWant(t, created, "available_balance", "0.00")
	})

	t.Run("Get", func(t *testing.T) {
		w := sdkOK(t, res, "get")
		sdkWantWallet(t, w, id, label)
		sdkWant(t, w, "current_balance", "0.00")
	})

	t.Run("IntraTransfer", func(t *testing.T) {
		tr := sdkOK(t, res, "intraTransfer")
		origin, _ := tr["origin"].(map[string]any)
		dest, _ := tr["destination"].(map[string]any)
		if origin == nil || dest == nil {
			t.Fatalf("intraTransfer: want {origin, destination}, got %v", tr)
		}
		sdkWant(t, origin, "wallet_id", f.settlement)
		sdkWant(t, dest, "wallet_id", id)
		// Before: the funded settlement wallet as listed, the new wallet as created.
		ten := money.MustParse("10.00")
		for _, field := range []string{"current_balance", "available_balance"} {
			sdkWant(t, origin, field, sdkAmount(t, listedSettlement, field).Sub(ten).String())
			sdkWant(t, dest, field, sdkAmount(t, created, field).Add(ten).String())
		}
	})

	t.Run("Transactions", func(t *testing.T) {
		list := sdkOK(t, res, "transactions")
		sdkListShape(t, list)
		rows := sdkResults(t, list)
		if len(rows) != 1 {
			t.Fatalf("transactions: want 1 row (the transfer in), got %v", rows)
		}
		sdkWant(t, rows[0], "value", "10.00")
		sdkWant(t, rows[0], "running_balance", "10.00")
		sdkWant(t, rows[0], "currency", "KES")
		sdkWant(t, rows[0], "narrative", "sdk transfer")
	})

	// Each GET carries an unframed body; on a kept-alive connection the next request
	// would fail with 400 unless the server closes after every GET.
	for _, name := range []string{"get#2", "get#3"} {
		t.Run("Repeated_"+name, func(t *testing.T) {
			w := sdkOK(t, res, name)
			sdkWantWallet(t, w, id, label)
			sdkWant(t, w, "current_balance", "10.00")
		})
	}
}

func TestNodeSDK_Errors(t *testing.T) {
	t.Parallel()
	dir := sdkDir(t)
	f := sdkStart(t, "100.00")
	r := f.env.Do("POST", "/api/v1/wallets/", map[string]any{
		"label": "SDK-DEST", "wallet_type": "WORKING", "currency": "KES", "can_disburse": true,
	}, servicetest.Bearer(f.secret)...)
	if r.Status != 201 {
		t.Fatalf("create destination: %d %s", r.Status, r.Body)
	}
	dest, _ := r.Map(t)["wallet_id"].(string)
	if dest == "" {
		t.Fatalf("create destination: no wallet_id in %s", r.Body)
	}

	res := f.run(t, dir, "errors.js", map[string]string{
		"PAYSVC_SOURCE_WALLET": f.settlement,
		"PAYSVC_DEST_WALLET":   dest,
		"PAYSVC_AMOUNT":        "100.01",
		"PAYSVC_BAD_SECRET":    "ISSecretKey_test_" + strings.Repeat("x", 32),
	})

	t.Run("Transfer_InsufficientFunds", func(t *testing.T) {
		body := sdkRejected(t, res, "overdraw", 400)
		if body.Code != "insufficient_funds" {
			t.Errorf("code = %q, want insufficient_funds (detail %q)", body.Code, body.Detail)
		}
		// Nothing moved.
		for id, want := range map[string]string{f.settlement: "100.00", dest: "0.00"} {
			w := f.env.Do("GET", "/api/v1/wallets/"+id+"/", nil, servicetest.Bearer(f.secret)...).Map(t)
			sdkWant(t, w, "current_balance", want)
			sdkWant(t, w, "available_balance", want)
		}
	})

	for _, name := range []string{"wrongSecretList", "wrongSecretCreate"} {
		t.Run("WrongSecret_"+name, func(t *testing.T) {
			body := sdkRejected(t, res, name, 401)
			if body.Detail != "Invalid api token" {
				t.Errorf("detail = %q, want exactly %q", body.Detail, "Invalid api token")
			}
		})
	}

	t.Run("UnknownWallet", func(t *testing.T) {
		sdkRejected(t, res, "unknownWallet", 404)
	})

	t.Run("SucceedsAfterErrors", func(t *testing.T) {
		w := sdkOK(t, res, "afterErrors")
		sdkWant(t, w, "wallet_id", f.settlement)
		sdkWant(t, w, "current_balance", "100.00")
	})
}

// sdkDir returns the harness directory, failing (never skipping) when node or the
// pinned SDK is not installed: `make test` depends on `make sdk`, so a missing
// install is a broken setup, not a reason to test nothing.
func sdkDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH (%v): the Node SDK compatibility tests need it", err)
	}
	dir, err := filepath.Abs("sdktest")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "node_modules", "intasend-node", "package.json"))
	if err != nil {
		t.Fatalf("intasend-node is not installed in %s (%v): run `make sdk`", dir, err)
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil || pkg.Version != sdkVersion {
		t.Fatalf("installed intasend-node is %q, want %s: run `make sdk`", pkg.Version, sdkVersion)
	}
	return dir
}

// sdkFixture is a running service with one merchant whose KES settlement wallet
// holds funds deposited through the sandbox endpoint.
type sdkFixture struct {
	env            *servicetest.Env
	public, secret string
	settlement     string
}

func sdkStart(t *testing.T, funds string) *sdkFixture {
	t.Helper()
	env := servicetest.Start(t, nil)
	m := env.Merchant("SDK Merchant")
	f := &sdkFixture{env: env, public: m.PublicKey, secret: m.SecretKey}

	r := env.Do("GET", "/api/v1/wallets/", nil, servicetest.Bearer(m.SecretKey)...)
	if r.Status != 200 {
		t.Fatalf("list wallets: %d %s", r.Status, r.Body)
	}
	var list struct {
		Results []struct {
			WalletID   string `json:"wallet_id"`
			WalletType string `json:"wallet_type"`
			Currency   string `json:"currency"`
		} `json:"results"`
	}
	r.JSON(t, &list)
	for _, w := range list.Results {
		if w.WalletType == "SETTLEMENT" && w.Currency == "KES" {
			f.settlement = w.WalletID
		}
	}
	if f.settlement == "" {
		t.Fatalf("merchant has no KES settlement wallet: %s", r.Body)
	}

	r = env.Do("POST", "/api/v1/sandbox/wallets/"+f.settlement+"/deposit/", map[string]any{"amount": funds},
		servicetest.Bearer(m.SecretKey)...)
	if r.Status != 200 {
		t.Fatalf("sandbox deposit: %d %s", r.Status, r.Body)
	}
	if got := r.Map(t)["current_balance"]; got != funds {
		t.Fatalf("after deposit current_balance = %v, want %s", got, funds)
	}
	return f
}

// run runs `node -r ./redirect.js <script>` against the service, as the merchant, and returns its
// JSON output keyed by call name. A hang, a crash or a call left pending fails the
// test with everything the script printed.
func (f *sdkFixture) run(t *testing.T, dir, script string, vars map[string]string) map[string]json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sdkTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "-r", "./redirect.js", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PAYSVC_BASE_URL="+f.env.BaseURL,
		"PAYSVC_PUBLIC_KEY="+f.public, "PAYSVC_SECRET_KEY="+f.secret)
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within %s\nstdout:\n%s\nstderr:\n%s", script, sdkTimeout, &stdout, &stderr)
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %s: %v\nstderr:\n%s", script, err, &stderr)
	}
	if err != nil {
		t.Fatalf("%s exited with %v (a call is pending or the SDK crashed)\nstdout:\n%s\nstderr:\n%s", script, err, &stdout, &stderr)
	}
	var res map[string]json.RawMessage
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("%s printed no JSON object: %v\nstdout:\n%s\nstderr:\n%s", script, err, &stdout, &stderr)
	}
	t.Logf("%s:\n%s", script, &stdout)
	return res
}

// sdkResult is how harness.js records a rejection.
type sdkResult struct {
	Error        *string `json:"error"`
	RejectedWith string  `json:"rejected_with"`
	Status       *int    `json:"status"`
}

// sdkOK decodes a call that must have resolved (HTTP 200/201 with a JSON object).
func sdkOK(t *testing.T, res map[string]json.RawMessage, name string) map[string]any {
	t.Helper()
	raw, ok := res[name]
	if !ok {
		t.Fatalf("%s: no result (script output has %v)", name, sdkKeys(res))
	}
	var r sdkResult
	_ = json.Unmarshal(raw, &r)
	if r.Error != nil {
		t.Fatalf("%s: the SDK rejected (%s, HTTP %v): %s", name, r.RejectedWith, sdkStatus(r.Status), *r.Error)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: resolved with a non-object %s", name, raw)
	}
	return v
}

// sdkErrorBody is the error shape every client parses.
type sdkErrorBody struct {
	Detail string
	Code   string
}

// sdkRejected checks that a call rejected with an HTTP error whose (first chunk of)
// body is a JSON object with a non-empty detail, and returns it.
func sdkRejected(t *testing.T, res map[string]json.RawMessage, name string, status int) sdkErrorBody {
	t.Helper()
	raw, ok := res[name]
	if !ok {
		t.Fatalf("%s: no result (script output has %v)", name, sdkKeys(res))
	}
	var r sdkResult
	if err := json.Unmarshal(raw, &r); err != nil || r.Error == nil {
		t.Fatalf("%s: want a rejection, the SDK resolved with %s", name, raw)
	}
	if r.RejectedWith != "Buffer" {
		t.Fatalf("%s: rejected with a %s, not an HTTP error body: %s", name, r.RejectedWith, *r.Error)
	}
	if r.Status == nil || *r.Status != status {
		t.Errorf("%s: HTTP %v, want %d", name, sdkStatus(r.Status), status)
	}
	var body struct {
		Detail *string `json:"detail"`
		Errors []struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		} `json:"errors"`
	}
	if err := json.Unmarshal([]byte(*r.Error), &body); err != nil {
		t.Fatalf("%s: error body is not JSON (%v): %q", name, err, *r.Error)
	}
	if body.Detail == nil || *body.Detail == "" {
		t.Fatalf("%s: error body has no detail: %s", name, *r.Error)
	}
	out := sdkErrorBody{Detail: *body.Detail}
	if len(body.Errors) > 0 {
		out.Code = body.Errors[0].Code
	}
	return out
}

func sdkStatus(s *int) any {
	if s == nil {
		return "none"
	}
	return *s
}

func sdkKeys(m map[string]json.RawMessage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// sdkListShape checks the interface's list envelope {count, next, previous, results}.
func sdkListShape(t *testing.T, list map[string]any) {
	t.Helper()
	for _, k := range []string{"count", "next", "previous", "results"} {
		if _, ok := list[k]; !ok {
			t.Errorf("list has no %q: %v", k, list)
		}
	}
	if _, ok := list["count"].(float64); !ok {
		t.Errorf("count is %T, want a number", list["count"])
	}
	if list["next"] != nil || list["previous"] != nil {
		t.Errorf("one page: next and previous must be null, got %v, %v", list["next"], list["previous"])
	}
}

func sdkResults(t *testing.T, list map[string]any) []map[string]any {
	t.Helper()
	raw, ok := list["results"].([]any)
	if !ok {
		t.Fatalf("results is %T, want an array", list["results"])
	}
	out := make([]map[string]any, len(raw))
	for i, r := range raw {
		if out[i], ok = r.(map[string]any); !ok {
			t.Fatalf("results[%d] is %T, want an object", i, r)
		}
	}
	return out
}

func sdkWant(t *testing.T, obj map[string]any, field string, want any) {
	t.Helper()
	if got, ok := obj[field]; !ok || got != want {
		t.Errorf("%s = %#v, want %#v", field, got, want)
	}
}

// sdkAmount reads a decimal-string money field.
func sdkAmount(t *testing.T, obj map[string]any, field string) money.Amount {
	t.Helper()
	s, ok := obj[field].(string)
	if !ok {
		t.Fatalf("%s = %#v, want a decimal string", field, obj[field])
	}
	a, err := money.Parse(s)
	if err != nil {
		t.Fatalf("%s: %v", field, err)
	}
	return a
}

func sdkWantWallet(t *testing.T, w map[string]any, id, label string) {
	t.Helper()
	sdkWant(t, w, "wallet_id", id)
	sdkWant(t, w, "label", label)
	sdkWant(t, w, "wallet_type", "WORKING")
	sdkWant(t, w, "currency", "KES")
	sdkWant(t, w, "can_disburse", true)
}

// The official SDK's collection calls: STK push with both keys, status with the
// public key alone (the SDK drops its Bearer token there), polling to COMPLETE, and an
// STK push from the same object afterwards (public key alone).
func TestNodeSDK_Collection(t *testing.T) {
	t.Parallel()
	dir := sdkDir(t)
	f := sdkStart(t, "1.00")
	res := f.run(t, dir, "collection.js", map[string]string{"PAYSVC_PHONE": "254708374149", "PAYSVC_AMOUNT": "100"})
	push := sdkOK(t, res, "stkPush")
	inv, _ := push["invoice"].(map[string]any)
	if inv == nil || inv["state"] != "PENDING" || inv["provider"] != "M-PESA" || inv["value"] != "100.00" || inv["api_ref"] != "sdk-order-1" {
		t.Fatalf("stkPush: %v", push)
	}
	if st := sdkOK(t, res, "status"); st["invoice"] == nil || st["meta"] == nil {
		t.Fatalf("status: %v", st)
	}
	later := sdkOK(t, res, "statusLater")["invoice"].(map[string]any)
	if later["state"] != "COMPLETE" || later["mpesa_reference"] == nil {
		t.Fatalf("statusLater: %v", later)
	}
	if p := sdkOK(t, res, "stkPushPub"); p["invoice"] == nil {
		t.Fatalf("stkPushPub: %v", p)
	}
	ch := sdkOK(t, res, "charge")
	if ch["id"] == nil || ch["signature"] == "" || ch["url"] == nil || ch["paid"] != false || ch["amount"] != "150.00" {
		t.Fatalf("charge: %v", ch)
	}
	if st := sdkOK(t, res, "statusSig"); st["invoice"] == nil {
		t.Fatalf("statusSig: %v", st)
	}
	r := f.env.Do("GET", "/api/v1/wallets/"+f.settlement+"/", nil, servicetest.Bearer(f.secret)...)
	// 1.00 deposited and 98.50 from the 100.00 collection (1.5% fee) at least; the
	// other collections may still be in flight. The ledger must balance whatever.
	got := money.MustParse(r.Map(t)["available_balance"].(string))
	if got.Cmp(money.MustParse("99.50")) < 0 {
		t.Fatalf("settlement wallet holds %s, want at least 99.50", got)
	}
	if rep, err := storage.CheckLedger(context.Background(), f.env.Schema.DB); err != nil || !rep.OK {
		t.Fatalf("ledger: %+v %v", rep, err)
	}
}
