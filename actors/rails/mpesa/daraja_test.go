package mpesa_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"paysvc/actors/values/money"

	"paysvc/actors/rails/mpesa"
	"paysvc/actors/rails/mpesa/mpesatest"
)

// clock is a settable clock for token expiry tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// callbackReceiver is the merchant-facing side: an HTTP endpoint whose
// handler decodes Daraja callbacks with ParseCallback.
type callbackReceiver struct {
	srv     *httptest.Server
	results chan mpesa.Result
	errs    chan error
}

func newCallbackReceiver(t *testing.T) *callbackReceiver {
	cr := &callbackReceiver{results: make(chan mpesa.Result, 16), errs: make(chan error, 16)}
	cr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		res, err := mpesa.ParseCallback(body)
		if err != nil {
			cr.errs <- err
			http.Error(w, "bad callback", http.StatusBadRequest)
			return
		}
		cr.results <- res
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ResultCode":0,"ResultDesc":"Accepted"}`)
	}))
	t.Cleanup(cr.srv.Close)
	return cr
}

func (cr *callbackReceiver) next(t *testing.T) mpesa.Result {
	t.Helper()
	select {
	case r := <-cr.results:
		return r
	case err := <-cr.errs:
		t.Fatalf("callback rejected: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("no callback")
	}
	return mpesa.Result{}
}

// checkoutIDRE is the shape of a Daraja CheckoutRequestID.
var checkoutIDRE = regexp.MustCompile(`^ws_CO_\d{26}$`)

func newFake(t *testing.T) *mpesatest.FakeDaraja {
	f := mpesatest.NewFakeDaraja()
	t.Cleanup(f.Close)
	return f
}

func newDaraja(t *testing.T, cfg mpesa.DarajaConfig) *mpesa.Daraja {
	t.Helper()
	d, err := mpesa.NewDaraja(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func stk(invoice, phone, amount string) mpesa.STKRequest {
	return mpesa.STKRequest{InvoiceID: invoice, MerchantID: "M1", Phone: phone, Amount: money.MustParse(amount),
		AccountRef: invoice, Description: "Order " + invoice}
}

func TestDarajaTokenFetchedOnceAndReused(t *testing.T) {
	f := newFake(t)
	d := newDaraja(t, f.Config("https://example.test/cb"))
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			_, err := d.Push(ctx, stk(fmt.Sprintf("INV%d", i), "254708374149", "10"))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	id := f.Requests()[0].CheckoutRequestID
	if _, _, err := d.Query(ctx, id); err != nil {
		t.Fatal(err)
	}
	if n := f.TokenRequests(); n != 1 {
		t.Errorf("%d token requests for 20 concurrent pushes and a query, want 1", n)
	}
	if n := len(f.Requests()); n != 20 {
		t.Errorf("%d pushes recorded", n)
	}
}

func TestDarajaExpiredTokenRefreshed(t *testing.T) {
	f := newFake(t)
	clk := &clock{t: time.Date(2024, 3, 1, 8, 0, 0, 0, time.UTC)}
	cfg := f.Config("https://example.test/cb")
	cfg.Now = clk.Now
	d := newDaraja(t, cfg)
	ctx := context.Background()
	push := func() {
		t.Helper()
		if _, err := d.Push(ctx, stk("INV1", "254708374149", "10")); err != nil {
			t.Fatal(err)
		}
	}
	push()
	clk.Advance(50 * time.Minute) // 3599 s token, refreshed a minute early: still fresh
	push()
	if n := f.TokenRequests(); n != 1 {
		t.Fatalf("%d token requests before expiry, want 1", n)
	}
	clk.Advance(9 * time.Minute) // 59 min: inside the last minute
	push()
	if n := f.TokenRequests(); n != 2 {
		t.Fatalf("%d token requests after expiry, want 2", n)
	}
}

func TestDarajaRevokedTokenReplaced(t *testing.T) {
	f := newFake(t)
	d := newDaraja(t, f.Config("https://example.test/cb"))
	ctx := context.Background()
	if _, err := d.Push(ctx, stk("INV1", "254708374149", "10")); err != nil {
		t.Fatal(err)
	}
	f.ExpireTokens() // Daraja forgets the token before its expires_in
	if _, err := d.Push(ctx, stk("INV2", "254708374149", "10")); err != nil {
		t.Fatalf("push after revocation: %v", err)
	}
	if n, p := f.TokenRequests(), len(f.Requests()); n != 2 || p != 2 {
		t.Errorf("token requests %d pushes %d, want 2 and 2", n, p)
	}
}

func TestDarajaTokenRefusedTwiceIsAuthError(t *testing.T) {
	var tokens, pushes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == mpesa.PathOAuth {
			tokens.Add(1)
			_, _ = io.WriteString(w, `{"access_token":"tok","expires_in":"3599"}`)
			return
		}
		pushes.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"requestId":"12345-67890123-1","errorCode":"404.001.03","errorMessage":"Invalid Access Token"}`)
	}))
	defer srv.Close()
	cfg := mpesa.DarajaConfig{BaseURL: srv.URL, ConsumerKey: "k", ConsumerSecret: "s", ShortCode: "174379", Passkey: "p", CallbackURL: "https://example.test/cb"}
	d := newDaraja(t, cfg)
	_, err := d.Push(context.Background(), stk("INV1", "254708374149", "10"))
	if !errors.Is(err, mpesa.ErrAuth) || errors.Is(err, mpesa.ErrRejected) {
		t.Errorf("err = %v, want ErrAuth", err)
	}
	if tokens.Load() != 2 || pushes.Load() != 2 {
		t.Errorf("tokens %d pushes %d, want one retry with a fresh token", tokens.Load(), pushes.Load())
	}
}

func TestDarajaPasswordAndFields(t *testing.T) {
	f := newFake(t)
	cfg := f.Config("https://example.test/mpesa/callback")
	// 21:30:05 UTC is 00:30:05 the next day in Nairobi.
	cfg.Now = func() time.Time { return time.Date(2024, 3, 1, 21, 30, 5, 0, time.UTC) }
	d := newDaraja(t, cfg)
	req := mpesa.STKRequest{InvoiceID: "INV-LONG-REFERENCE-1", MerchantID: "M1", Phone: "254708374149",
		Amount: money.MustParse("1500.00"), Description: "Payment for order 42"}
	id, err := d.Push(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := f.Request(id)
	if !ok {
		t.Fatal("request not recorded under its CheckoutRequestID")
	}
	wantTS := "20240302003005"
	wantPW := base64.StdEncoding.EncodeToString([]byte("174379" + mpesatest.FakePasskey + wantTS))
	checks := []struct{ name, got, want string }{
		{"Timestamp", got.Timestamp, wantTS},
		{"Password", got.Password, wantPW},
		{"BusinessShortCode", got.BusinessShortCode, "174379"},
		{"TransactionType", got.TransactionType, "CustomerPayBillOnline"},
		{"Amount", got.Amount, "1500"},
		{"PartyA", got.PartyA, "254708374149"},
		{"PartyB", got.PartyB, "174379"},
		{"PhoneNumber", got.PhoneNumber, "254708374149"},
		{"CallBackURL", got.CallBackURL, "https://example.test/mpesa/callback/INV-LONG-REFERENCE-1"},
		{"AccountReference", got.AccountReference, "INV-LONG-REF"}, // 12 max
		{"TransactionDesc", got.TransactionDesc, "Payment for o"},  // 13 max
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if !strings.Contains(string(got.Raw), `"Amount":1500,`) {
		t.Errorf("Amount is not sent as a whole JSON number: %s", got.Raw)
	}
	if !checkoutIDRE.MatchString(id) {
		t.Errorf("CheckoutRequestID %q", id)
	}
}

func TestDarajaSuccessCallbackEndToEnd(t *testing.T) {
	f := newFake(t)
	cr := newCallbackReceiver(t)
	d := newDaraja(t, f.Config(cr.srv.URL+"/callbacks/mpesa"))
	id, err := d.Push(context.Background(), stk("INV1", "254712345678", "250"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Complete(id, 0, "RLA0R69NXM"); err != nil {
		t.Fatal(err)
	}
	r := cr.next(t)
	if !r.Success() || r.Stage != mpesa.StageFinal || r.Code != 0 || r.Receipt != "RLA0R69NXM" ||
		r.CheckoutRequestID != id || r.Description != "The service request is processed successfully." ||
		!r.Amount.Equal(money.MustParse("250")) || r.Phone != "254712345678" || r.InvoiceID != "" {
		t.Errorf("parsed %+v", r)
	}
	// Daraja may deliver the same callback twice; it parses the same.
	if err := f.Complete(id, 0, "RLA0R69NXM"); err != nil {
		t.Fatal(err)
	}
	if r2 := cr.next(t); r2.Receipt != r.Receipt || r2.CheckoutRequestID != id {
		t.Errorf("repeat parsed %+v", r2)
	}
	if err := f.Complete(id, 1032, ""); err == nil {
		t.Error("fake accepted a second, different outcome")
	}
}

func TestDarajaCancelledCallback(t *testing.T) {
	f := newFake(t)
	cr := newCallbackReceiver(t)
	d := newDaraja(t, f.Config(cr.srv.URL))
	id, err := d.Push(context.Background(), stk("INV1", "254712345678", "250"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Complete(id, mpesa.CodeCancelled, ""); err != nil {
		t.Fatal(err)
	}
	r := cr.next(t)
	if r.Success() || r.Code != 1032 || r.Description != "Request cancelled by user" || r.Receipt != "" ||
		r.CheckoutRequestID != id || !r.Amount.IsZero() {
		t.Errorf("parsed %+v", r)
	}
}

func TestDarajaLostCallbackRecoveredByQuery(t *testing.T) {
	f := newFake(t)
	d := newDaraja(t, f.Config("https://example.test/cb"))
	ctx := context.Background()
	id, err := d.Push(ctx, stk("INV1", "254712345678", "99"))
	if err != nil {
		t.Fatal(err)
	}
	r, pending, err := d.Query(ctx, id)
	if err != nil || !pending {
		t.Fatalf("before the outcome: %+v pending=%v err=%v, want pending", r, pending, err)
	}
	if err := f.Lose(id, 0, "SAB1CD2EFG"); err != nil {
		t.Fatal(err)
	}
	r, pending, err = d.Query(ctx, id)
	if err != nil || pending {
		t.Fatalf("after the outcome: pending=%v err=%v", pending, err)
	}
	if !r.Success() || r.CheckoutRequestID != id || r.Description != mpesa.ResultDesc(0) || r.Receipt != "" {
		t.Errorf("query result %+v", r)
	}

	id2, err := d.Push(ctx, stk("INV2", "254712345678", "99"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Lose(id2, mpesa.CodeUnreachable, ""); err != nil {
		t.Fatal(err)
	}
	r, pending, err = d.Query(ctx, id2)
	if err != nil || pending || r.Code != 1037 || r.Success() || r.Description != "DS timeout user cannot be reached" {
		t.Errorf("timeout query: %+v pending=%v err=%v", r, pending, err)
	}

	_, _, err = d.Query(ctx, "ws_CO_000000000000000000000000")
	var apiErr *mpesa.APIError
	if !errors.Is(err, mpesa.ErrRejected) || !errors.As(err, &apiErr) || apiErr.Code != "400.002.02" {
		t.Errorf("unknown id: %v", err)
	}
}

func TestDarajaPushErrors(t *testing.T) {
	f := newFake(t)
	d := newDaraja(t, f.Config("https://example.test/cb"))
	ctx := context.Background()

	if _, err := d.Push(ctx, stk("INV1", "0712345678", "10")); !errors.Is(err, mpesa.ErrInvalidRequest) {
		t.Errorf("local phone: %v", err)
	}
	if _, err := d.Push(ctx, stk("INV1", "254712345678", "10.50")); !errors.Is(err, mpesa.ErrInvalidRequest) {
		t.Errorf("cents: %v", err)
	}
	if f.TokenRequests() != 0 || len(f.Requests()) != 0 {
		t.Error("an invalid request reached Daraja")
	}

	f.FailNextPush(http.StatusBadRequest, "400.002.02", "Bad Request - Invalid PhoneNumber")
	_, err := d.Push(ctx, stk("INV1", "254712345678", "10"))
	var apiErr *mpesa.APIError
	if !errors.Is(err, mpesa.ErrRejected) || !errors.As(err, &apiErr) || apiErr.HTTPStatus != 400 || apiErr.Code != "400.002.02" {
		t.Errorf("rejected push: %v", err)
	}

	f.FailNextPush(http.StatusServiceUnavailable, "", "")
	if _, err := d.Push(ctx, stk("INV1", "254712345678", "10")); !errors.Is(err, mpesa.ErrUnavailable) || errors.Is(err, mpesa.ErrRejected) {
		t.Errorf("gateway error page: %v", err)
	}

	ctx2, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.Push(ctx2, stk("INV1", "254712345678", "10")); err == nil {
		t.Error("push with a cancelled context succeeded")
	}
}

func TestDarajaConfigChecked(t *testing.T) {
	good := mpesa.DarajaConfig{BaseURL: "https://sandbox.safaricom.co.ke", ConsumerKey: "k", ConsumerSecret: "s",
		ShortCode: "174379", Passkey: "p", CallbackURL: "https://example.test/cb"}
	if _, err := mpesa.NewDaraja(good, nil); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*mpesa.DarajaConfig){
		"no base":        func(c *mpesa.DarajaConfig) { c.BaseURL = "" },
		"ftp base":       func(c *mpesa.DarajaConfig) { c.BaseURL = "ftp://x" },
		"base with user": func(c *mpesa.DarajaConfig) { c.BaseURL = "https://u:pw@x" },
		"no key":         func(c *mpesa.DarajaConfig) { c.ConsumerKey = "" },
		"no secret":      func(c *mpesa.DarajaConfig) { c.ConsumerSecret = "" },
		"no passkey":     func(c *mpesa.DarajaConfig) { c.Passkey = "" },
		"bad shortcode":  func(c *mpesa.DarajaConfig) { c.ShortCode = "17a" },
		"no callback":    func(c *mpesa.DarajaConfig) { c.CallbackURL = "/cb" },
		"bad type":       func(c *mpesa.DarajaConfig) { c.TransactionType = "Sell" },
	} {
		c := good
		mut(&c)
		if _, err := mpesa.NewDaraja(c, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestDarajaErrorsNeverLeakSecrets(t *testing.T) {
	const secret = "Sup3rS3cretConsumerValue"
	const passkey = "passkey-0123456789abcdef-private"
	basic := base64.StdEncoding.EncodeToString([]byte(mpesatest.FakeConsumerKey + ":" + secret))
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", what)
			return
		}
		for _, s := range []string{secret, passkey, basic, mpesatest.FakeConsumerSecret, mpesatest.FakePasskey} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: error leaks a secret: %v", what, err)
			}
		}
	}

	f := newFake(t)
	// Wrong consumer secret: the token request is refused.
	cfg := f.Config("https://example.test/cb")
	cfg.ConsumerSecret = secret
	cfg.Passkey = passkey
	d := newDaraja(t, cfg)
	_, err := d.Push(ctx, stk("INV1", "254708374149", "10"))
	if !errors.Is(err, mpesa.ErrAuth) {
		t.Errorf("wrong secret: %v, want ErrAuth", err)
	}
	check("wrong secret", err)
	_, _, err = d.Query(ctx, "ws_CO_1")
	check("wrong secret query", err)

	// Right secret, wrong passkey: the push is refused for its password.
	cfg = f.Config("https://example.test/cb")
	cfg.Passkey = passkey
	d = newDaraja(t, cfg)
	_, err = d.Push(ctx, stk("INV1", "254708374149", "10"))
	if !errors.Is(err, mpesa.ErrRejected) || !strings.Contains(err.Error(), "Password") {
		t.Errorf("wrong passkey: %v", err)
	}
	check("wrong passkey", err)

	// An error answer that echoes secrets back is scrubbed.
	cfg = f.Config("https://example.test/cb")
	d = newDaraja(t, cfg)
	f.FailNextPush(http.StatusBadRequest, "400.002.02", "bad credentials "+mpesatest.FakeConsumerSecret+" / "+mpesatest.FakePasskey)
	_, err = d.Push(ctx, stk("INV1", "254708374149", "10"))
	check("echoed secrets", err)
	if !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("echo not redacted: %v", err)
	}

	// Daraja unreachable.
	dead := mpesatest.NewFakeDaraja()
	cfg = dead.Config("https://example.test/cb")
	dead.Close()
	cfg.ConsumerSecret, cfg.Passkey = secret, passkey
	d = newDaraja(t, cfg)
	_, err = d.Push(ctx, stk("INV1", "254708374149", "10"))
	check("unreachable", err)

	// Printing the config or the adapter.
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), fmt.Sprint(d)} {
		if strings.Contains(s, secret) || strings.Contains(s, passkey) {
			t.Errorf("printed config leaks: %s", s)
		}
	}
}

func TestParseCallbackAcceptsVariants(t *testing.T) {
	cases := map[string]struct {
		body    string
		code    int
		receipt string
		amount  string
	}{
		"documented success": {`{"Body":{"stkCallback":{"MerchantRequestID":"29115-34620561-1","CheckoutRequestID":"ws_CO_191220191020363925","ResultCode":0,"ResultDesc":"The service request is processed successfully.","CallbackMetadata":{"Item":[{"Name":"Amount","Value":1.00},{"Name":"MpesaReceiptNumber","Value":"NLJ7RT61SV"},{"Name":"TransactionDate","Value":20191219102115},{"Name":"PhoneNumber","Value":254708374149}]}}}}`,
			0, "NLJ7RT61SV", "1.00"},
		"balance without value, amount 1.0": {`{"Body":{"stkCallback":{"MerchantRequestID":"1-2-1","CheckoutRequestID":"ws_CO_1","ResultCode":0,"ResultDesc":"ok","CallbackMetadata":{"Item":[{"Name":"Amount","Value":1.0},{"Name":"MpesaReceiptNumber","Value":"OEB44R5U3U"},{"Name":"Balance"},{"Name":"TransactionDate","Value":20200511201419},{"Name":"PhoneNumber","Value":254794721438}]}}}}`,
			0, "OEB44R5U3U", "1.00"},
		"large amount exact": {`{"Body":{"stkCallback":{"MerchantRequestID":"1","CheckoutRequestID":"ws_CO_1","ResultCode":0,"ResultDesc":"ok","CallbackMetadata":{"Item":[{"Name":"Amount","Value":123456789012345},{"Name":"MpesaReceiptNumber","Value":"X1"}]}}}}`,
			0, "X1", "123456789012345.00"},
		"cancelled": {`{"Body":{"stkCallback":{"MerchantRequestID":"1","CheckoutRequestID":"ws_CO_1","ResultCode":1032,"ResultDesc":"Request cancelled by user"}}}`,
			1032, "", ""},
		"code as string, extra fields": {`{"Body":{"stkCallback":{"MerchantRequestID":"1","CheckoutRequestID":"ws_CO_1","ResultCode":"1037","ResultDesc":"DS timeout user cannot be reached","Extra":true}},"Other":1}`,
			1037, "", ""},
	}
	for name, c := range cases {
		r, err := mpesa.ParseCallback([]byte(c.body))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if r.Stage != mpesa.StageFinal || r.Code != c.code || r.Receipt != c.receipt || r.CheckoutRequestID != "ws_CO_1" && name != "documented success" {
			t.Errorf("%s: %+v", name, r)
		}
		if c.amount != "" && !r.Amount.Equal(money.MustParse(c.amount)) {
			t.Errorf("%s: amount %s, want %s", name, r.Amount, c.amount)
		}
	}
}

func TestParseCallbackRejectsMalformed(t *testing.T) {
	ok := func(cb string) string { return `{"Body":{"stkCallback":` + cb + `}}` }
	meta := func(items string) string {
		return ok(`{"MerchantRequestID":"1","CheckoutRequestID":"ws_CO_1","ResultCode":0,"ResultDesc":"ok","CallbackMetadata":{"Item":[` + items + `]}}`)
	}
	cases := map[string]string{
		"empty":               ``,
		"not json":            `hello`,
		"truncated":           `{"Body":{"stkCallback":{`,
		"array":               `[]`,
		"null":                `null`,
		"no Body":             `{"stkCallback":{}}`,
		"Body not object":     `{"Body":"x"}`,
		"no stkCallback":      `{"Body":{}}`,
		"no CheckoutRequest":  ok(`{"MerchantRequestID":"1","ResultCode":1032,"ResultDesc":"x"}`),
		"empty CheckoutReq":   ok(`{"MerchantRequestID":"1","CheckoutRequestID":"","ResultCode":1032,"ResultDesc":"x"}`),
		"no MerchantRequest":  ok(`{"CheckoutRequestID":"ws_CO_1","ResultCode":1032,"ResultDesc":"x"}`),
		"no ResultCode":       ok(`{"MerchantRequestID":"1","CheckoutRequestID":"ws_CO_1","ResultDesc":"x"}`),
		"null ResultCode":     ok(`{"MerchantRequestID":"1","CheckoutRequestID":"ws_CO_1","ResultCode":null,"ResultDesc":"x"}`),
		"float ResultCode":    ok(`{"MerchantRequestID":"1","CheckoutRequestID":"ws_CO_1","ResultCode":0.5,"ResultDesc":"x"}`),
		"word ResultCode":     ok(`{"MerchantRequestID":"1","CheckoutRequestID":"ws_CO_1","ResultCode":"zero","ResultDesc":"x"}`),
		"no ResultDesc":       ok(`{"MerchantRequestID":"1","CheckoutRequestID":"ws_CO_1","ResultCode":1032}`),
		"id is number":        ok(`{"MerchantRequestID":"1","CheckoutRequestID":5,"ResultCode":1032,"ResultDesc":"x"}`),
		"success no metadata": ok(`{"MerchantRequestID":"1","CheckoutRequestID":"ws_CO_1","ResultCode":0,"ResultDesc":"ok"}`),
		"success no receipt":  meta(`{"Name":"Amount","Value":10}`),
		"success no amount":   meta(`{"Name":"MpesaReceiptNumber","Value":"ABC"}`),
		"amount exponent":     meta(`{"Name":"Amount","Value":1e2},{"Name":"MpesaReceiptNumber","Value":"ABC"}`),
		"amount negative":     meta(`{"Name":"Amount","Value":-5},{"Name":"MpesaReceiptNumber","Value":"ABC"}`),
		"amount zero":         meta(`{"Name":"Amount","Value":0},{"Name":"MpesaReceiptNumber","Value":"ABC"}`),
		"amount 3 places":     meta(`{"Name":"Amount","Value":1.005},{"Name":"MpesaReceiptNumber","Value":"ABC"}`),
		"amount too big":      meta(`{"Name":"Amount","Value":12345678901234567890},{"Name":"MpesaReceiptNumber","Value":"ABC"}`),
		"amount bool":         meta(`{"Name":"Amount","Value":true},{"Name":"MpesaReceiptNumber","Value":"ABC"}`),
		"amount twice":        meta(`{"Name":"Amount","Value":1},{"Name":"Amount","Value":2},{"Name":"MpesaReceiptNumber","Value":"ABC"}`),
		"receipt symbols":     meta(`{"Name":"Amount","Value":1},{"Name":"MpesaReceiptNumber","Value":"AB C;"}`),
		"receipt number":      meta(`{"Name":"Amount","Value":1},{"Name":"MpesaReceiptNumber","Value":null}`),
		"item without name":   meta(`{"Value":1},{"Name":"MpesaReceiptNumber","Value":"ABC"}`),
		"bad phone":           meta(`{"Name":"Amount","Value":1},{"Name":"MpesaReceiptNumber","Value":"ABC"},{"Name":"PhoneNumber","Value":"x"}`),
		"bad date":            meta(`{"Name":"Amount","Value":1},{"Name":"MpesaReceiptNumber","Value":"ABC"},{"Name":"TransactionDate","Value":2024}`),
		"trailing data":       ok(`{"MerchantRequestID":"1","CheckoutRequestID":"ws_CO_1","ResultCode":1032,"ResultDesc":"x"}`) + `{}`,
		"too large":           `{"Body":{"stkCallback":{"X":"` + strings.Repeat("a", 70<<10) + `"}}}`,
	}
	for name, body := range cases {
		r, err := mpesa.ParseCallback([]byte(body))
		if !errors.Is(err, mpesa.ErrBadCallback) {
			t.Errorf("%s: got %+v, %v; want ErrBadCallback", name, r, err)
			continue
		}
		if len(err.Error()) > 300 {
			t.Errorf("%s: error too long (%d bytes)", name, len(err.Error()))
		}
	}
}

func FuzzParseCallback(f *testing.F) {
	f.Add(mpesatest.STKCallbackBody(mpesatest.FakeSTKRequest{MerchantRequestID: "1-2-1", CheckoutRequestID: "ws_CO_1", Amount: "10", PhoneNumber: "254708374149"}, 0, "ABCDEFGHIJ", time.Now()))
	f.Add(mpesatest.STKCallbackBody(mpesatest.FakeSTKRequest{MerchantRequestID: "1-2-1", CheckoutRequestID: "ws_CO_1"}, 1032, "", time.Now()))
	f.Add([]byte(`{"Body":{"stkCallback":{"ResultCode":"0"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := mpesa.ParseCallback(body)
		if err != nil {
			if !errors.Is(err, mpesa.ErrBadCallback) {
				t.Fatalf("error %v does not wrap ErrBadCallback", err)
			}
			return
		}
		if r.Stage != mpesa.StageFinal || r.CheckoutRequestID == "" {
			t.Fatalf("accepted %+v", r)
		}
		if r.Code == 0 && (r.Receipt == "" || r.Amount.Sign() <= 0) {
			t.Fatalf("success without receipt or amount: %+v", r)
		}
	})
}
