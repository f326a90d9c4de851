package api_test

// Wire compatibility with the official Node SDK (intasend-node@1.1.2): the real SDK,
// preloaded with sdktest/redirect.js, calls a real paysvc over HTTP. See
// sdktest/SDK-NOTES.md for what the SDK puts on the wire and why each assertion
// below matters (unframed GET bodies, 200/201-only success, empty error bodies
// that hang the caller).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paysvc/actors/values/money"
	"paysvc/cmd/paysvc/service"
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
	return sdkStartWith(t, funds, nil)
}

// sdkStartWith is sdkStart on a service configured by mutate.
func sdkStartWith(t *testing.T, funds string, mutate func(*service.Config)) *sdkFixture {
	t.Helper()
	env := servicetest.Start(t, mutate)
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

// run runs `node -r ./redirect.js <script>` against the service, as the merchant
// (sdkFixture.script).
func (f *sdkFixture) run(t *testing.T, dir, script string, vars map[string]string) map[string]json.RawMessage {
	t.Helper()
	return f.script(t, dir, []string{"node", "-r", "./redirect.js", script}, vars)
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

// TestSDKPayouts runs the official SDK's payouts() calls (sdktest/payouts.js): an
// M-Pesa B2C file approved by posting the initiation response back, with mixed
// outcomes (an account ending 0011 fails, one ending 0014 answers late), a second
// approval that must be refused, and PesaLink, B2B, P2P (INTASEND) and airtime files
// paid without approval. Then it checks the money over HTTP to the cent.
func TestSDKPayouts(t *testing.T) {
	t.Parallel()
	dir := sdkDir(t)
	const funds = "100000.00"
	f := sdkStart(t, funds)
	payer := &bundle{env: f.env, secret: f.secret, public: f.public, settlement: f.settlement}
	recipient := newBundle(t, f.env, "SDK Recipient")

	res := f.run(t, dir, "payouts.js", map[string]string{"PAYSVC_RECIPIENT_WALLET": recipient.settlement})

	dec := func(s string) money.Amount { return money.MustParse(s) }
	wantAmount := func(t *testing.T, obj map[string]any, field, want string) {
		t.Helper()
		if got := sdkAmount(t, obj, field); !got.Equal(dec(want)) {
			t.Errorf("%s = %s, want %s", field, got, want)
		}
	}
	txns := sdkTxns
	// final checks a file the SDK polled to the end, and that the service says the
	// same over HTTP.
	final := func(t *testing.T, name, provider, paid, failed, charges string) map[string]any {
		t.Helper()
		done := sdkOK(t, res, name)
		sdkWant(t, done, "status", "COMPLETE")
		sdkWant(t, done, "status_code", "BC100")
		sdkWant(t, done, "provider", provider)
		wantAmount(t, done, "paid_amount", paid)
		wantAmount(t, done, "failed_amount", failed)
		wantAmount(t, done, "actual_charges", charges)
		again := payer.waitFile(t, done["tracking_id"].(string))
		for _, k := range []string{"status", "status_code", "paid_amount", "failed_amount", "actual_charges"} {
			if again[k] != done[k] {
				t.Errorf("HTTP status %s = %v, the SDK saw %v", k, again[k], done[k])
			}
		}
		return done
	}
	paidOK := sdkPaid

	t.Run("MpesaInitiate", func(t *testing.T) {
		m := sdkOK(t, res, "mpesa")
		sdkWant(t, m, "status", "PREVIEW-AND-APPROVE")
		sdkWant(t, m, "status_code", "BP103")
		sdkWant(t, m, "provider", "MPESA-B2C")
		sdkWant(t, m, "requires_approval", "YES")
		sdkWant(t, m, "transactions_count", float64(4))
		if n, _ := m["nonce"].(string); n == "" {
			t.Errorf("no nonce in the initiation response: %v", m)
		}
		// 1% with minimum 10 and cap 100: 10 + 10 + 15 + 100.
		wantAmount(t, m, "total_amount", "21850")
		wantAmount(t, m, "charge_estimate", "135")
		wantAmount(t, m, "total_amount_estimate", "21985")
		sdkWant(t, txns(t, m)["254712340011"], "amount", "250.00") // sent as a JSON number
	})

	t.Run("Approve", func(t *testing.T) {
		a := sdkOK(t, res, "approve")
		sdkWant(t, a, "status", "PROCESSING")
		sdkWant(t, a, "tracking_id", sdkOK(t, res, "mpesa")["tracking_id"])
	})

	t.Run("ApproveTwice", func(t *testing.T) {
		body := sdkRejected(t, res, "approveAgain", 400)
		if body.Code != "not_awaiting_approval" {
			t.Errorf("code = %q, want not_awaiting_approval (detail %q)", body.Code, body.Detail)
		}
	})

	t.Run("MpesaMixedOutcomes", func(t *testing.T) {
		done := final(t, "mpesaStatus", "MPESA-B2C", "21600", "250", "125")
		tx := txns(t, done)
		bad := tx["254712340011"]
		if bad["status"] != "FAILED" || bad["status_code"] != "TF106" || bad["status_description"] == "" || bad["provider_reference"] != nil {
			t.Errorf("invalid account: %v", bad)
		}
		for _, acc := range []string{"254708374149", "254712340014", "254711223344"} {
			paidOK(t, tx[acc])
		}
		wantAmount(t, tx["254711223344"], "charge", "100") // the cap
		wantAmount(t, tx["254712340014"], "charge", "15")
	})

	t.Run("Bank", func(t *testing.T) {
		sdkWant(t, sdkOK(t, res, "bank"), "status", "PROCESSING")
		done := final(t, "bankStatus", "PESALINK", "2500.50", "0", "50")
		tx := txns(t, done)["1234567890"]
		paidOK(t, tx)
		sdkWant(t, tx, "bank_code", "11")
	})

	t.Run("B2B", func(t *testing.T) {
		sdkWant(t, sdkOK(t, res, "b2b"), "status", "PROCESSING")
		done := final(t, "b2bStatus", "MPESA-B2B", "35000", "0", "250") // 50 + 200 (the cap)
		tx := txns(t, done)
		paidOK(t, tx["888880"])
		sdkWant(t, tx["888880"], "account_type", "PayBill")
		sdkWant(t, tx["888880"], "account_reference", "ACC-778899")
		paidOK(t, tx["512345"])
		sdkWant(t, tx["512345"], "account_type", "TillNumber")
	})

	// The SDK README's body, account 247247 as a JSON number (SDK-NOTES.md section 6:
	// accept numbers and strings for account and amount).
	t.Run("B2BReadmeExample", func(t *testing.T) {
		m := sdkOK(t, res, "b2bExample")
		sdkWant(t, m, "status", "PREVIEW-AND-APPROVE")
		sdkWant(t, txns(t, m)["247247"], "account_reference", "11111111")
	})

	t.Run("P2P", func(t *testing.T) {
		sdkWant(t, sdkOK(t, res, "p2p"), "status", "PROCESSING")
		done := final(t, "p2pStatus", "P2P", "750.25", "0", "0")
		paidOK(t, txns(t, done)[recipient.settlement])
	})

	t.Run("Airtime", func(t *testing.T) {
		sdkWant(t, sdkOK(t, res, "airtime"), "status", "PROCESSING")
		done := final(t, "airtimeStatus", "AIRTIME", "50", "0", "0")
		paidOK(t, txns(t, done)["254722000111"])
	})

	t.Run("Summary", func(t *testing.T) {
		var summary map[string]struct {
			Status string `json:"status"`
			Polls  int    `json:"polls"`
		}
		if err := json.Unmarshal(res["summary"], &summary); err != nil {
			t.Fatalf("summary: %v: %s", err, res["summary"])
		}
		for _, name := range []string{"mpesaStatus", "bankStatus", "b2bStatus", "p2pStatus", "airtimeStatus"} {
			if s := summary[name]; s.Status != "COMPLETE" || s.Polls < 1 {
				t.Errorf("summary %s: %+v", name, s)
			}
		}
	})

	t.Run("Money", func(t *testing.T) {
		// Paid amounts plus charges of every file; the 0011 transaction's 250 (and its
		// fee) is released, and the unapproved README file holds nothing.
		var out money.Amount
		for _, a := range []string{
			"21600", "125", // B2C
			"2500.50", "50", // PesaLink
			"35000", "250", // B2B
			"750.25", // P2P, free
			"50",     // airtime, free
		} {
			out = out.Add(dec(a))
		}
		want := dec(funds).Sub(out)
		if want.String() != "39674.25" {
			t.Fatalf("arithmetic: %s", want)
		}
		if cur, av := payer.balance(t, f.settlement); cur != want.String() || av != want.String() {
			t.Errorf("payer settlement: current %s available %s, want %s for both", cur, av, want)
		}
		if cur, av := recipient.balance(t, recipient.settlement); cur != "750.25" || av != "750.25" {
			t.Errorf("recipient settlement: current %s available %s, want 750.25", cur, av)
		}
		if rep, err := storage.CheckLedger(context.Background(), f.env.Schema.DB); err != nil || !rep.OK {
			t.Errorf("ledger: %+v %v", rep, err)
		}
	})
}

// TestNodeSDK_FundCheckout: wallets().fundCheckout with a WORKING wallet and
// CUSTOMER-PAYS, paid by M-Pesa as the hosted page pays (a payer also naming
// BUSINESS-PAYS and the settlement wallet): the customer pays 1,015.00 and the
// WORKING wallet, not the settlement wallet, is credited 1,000.00.
func TestNodeSDK_FundCheckout(t *testing.T) {
	t.Parallel()
	dir := sdkDir(t)
	f := sdkStart(t, "1.00")
	r := f.env.Do("POST", "/api/v1/wallets/", map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": "Funded"},
		servicetest.Bearer(f.secret)...)
	if r.Status != 201 {
		t.Fatalf("create wallet: %d %s", r.Status, r.Body)
	}
	working := r.Map(t)["wallet_id"].(string)
	res := f.run(t, dir, "checkout.js", map[string]string{"PAYSVC_WALLET": working, "PAYSVC_PHONE": "254708374149",
		"PAYSVC_OTHER_WALLET": f.settlement})
	co := sdkOK(t, res, "fundCheckout")
	if co["wallet_id"] != working || co["mobile_tarrif"] != "CUSTOMER-PAYS" || co["amount"] != "1000.00" {
		t.Fatalf("fundCheckout: %v", co)
	}
	inv := sdkOK(t, res, "payOnPage")["invoice"].(map[string]any)
	if inv["value"] != "1015.00" || inv["charges"] != "15.00" || inv["net_amount"] != "1000.00" {
		t.Fatalf("payOnPage: %v", inv)
	}
	st := sdkOK(t, res, "status")
	if st["invoice"].(map[string]any)["state"] != "COMPLETE" {
		t.Fatalf("status: %v", st)
	}
	// The signature (whoever holds the page) reads the payer masked, in the same
	// shape; the merchant's own key reads the payer the session described.
	if c := st["meta"].(map[string]any)["customer"].(map[string]any); c["first_name"] != nil || c["email"] != nil ||
		c["phone_number"] != "2547****4149" {
		t.Fatalf("customer by signature: %v", c)
	}
	inv = st["invoice"].(map[string]any)
	own := f.env.Do("POST", "/api/v1/payment/status/", map[string]any{"invoice_id": inv["invoice_id"]}, servicetest.Bearer(f.secret)...)
	if c := own.Map(t)["meta"].(map[string]any)["customer"].(map[string]any); c["first_name"] != "Node" || c["email"] != "fund@example.com" ||
		c["phone_number"] != "254708374149" {
		t.Fatalf("customer by the secret key: %s", own.Body)
	}
	for id, want := range map[string]string{working: "1000.00", f.settlement: "1.00"} {
		r := f.env.Do("GET", "/api/v1/wallets/"+id+"/", nil, servicetest.Bearer(f.secret)...)
		if got := r.Map(t)["current_balance"]; got != want {
			t.Fatalf("wallet %s holds %v, want %s", id, got, want)
		}
	}
	if rep, err := storage.CheckLedger(context.Background(), f.env.Schema.DB); err != nil || !rep.OK {
		t.Fatalf("ledger: %+v %v", rep, err)
	}
}
