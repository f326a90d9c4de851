package api_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"paysvc/cmd/paysvc/service"
	"testing"
	"time"

	"paysvc/actors/rails/mpesa/mpesatest"
	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
)

// bundle is what most API tests need: a running service and one funded merchant.
type bundle struct {
	env        *servicetest.Env
	secret     string
	public     string
	merchant   string
	settlement string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	env := servicetest.Start(t, nil)
	return newBundle(t, env, "Acme")
}

func newBundle(t *testing.T, env *servicetest.Env, name string) *bundle {
	t.Helper()
	m := env.Merchant(name)
	b := &bundle{env: env, secret: m.SecretKey, public: m.PublicKey, merchant: m.MerchantID}
	var list struct {
		Results []map[string]any `json:"results"`
	}
	r := b.get("/api/v1/wallets/")
	if r.Status != 200 {
		t.Fatalf("list wallets: %d %s", r.Status, r.Body)
	}
	r.JSON(t, &list)
	if len(list.Results) != 1 || list.Results[0]["wallet_type"] != "SETTLEMENT" {
		t.Fatalf("new merchant should have exactly its KES settlement wallet, got %s", r.Body)
	}
	b.settlement = list.Results[0]["wallet_id"].(string)
	return b
}

func (b *bundle) get(path string, headers ...string) servicetest.Response {
	return b.env.Do("GET", path, nil, append(servicetest.Bearer(b.secret), headers...)...)
}

func (b *bundle) post(path string, body any, headers ...string) servicetest.Response {
	return b.env.Do("POST", path, body, append(servicetest.Bearer(b.secret), headers...)...)
}

// wallet creates a WORKING wallet and returns its id.
func (b *bundle) wallet(t *testing.T, currency, label string) string {
	t.Helper()
	r := b.post("/api/v1/wallets/", map[string]any{"currency": currency, "wallet_type": "WORKING", "label": label})
	if r.Status != 201 {
		t.Fatalf("create wallet: %d %s", r.Status, r.Body)
	}
	return r.Map(t)["wallet_id"].(string)
}

func (b *bundle) deposit(t *testing.T, walletID, amount string) {
	t.Helper()
	r := b.post(fmt.Sprintf("/api/v1/sandbox/wallets/%s/deposit/", walletID), map[string]any{"amount": amount})
	if r.Status != 200 {
		t.Fatalf("deposit: %d %s", r.Status, r.Body)
	}
}

func (b *bundle) transfer(from, to string, amount any, headers ...string) servicetest.Response {
	return b.post(fmt.Sprintf("/api/v1/wallets/%s/intra_transfer/", from),
		map[string]any{"wallet_id": to, "amount": amount, "narrative": "test transfer"}, headers...)
}

func (b *bundle) balance(t *testing.T, walletID string) (current, available string) {
	t.Helper()
	r := b.get("/api/v1/wallets/" + walletID + "/")
	if r.Status != 200 {
		t.Fatalf("get wallet %s: %d %s", walletID, r.Status, r.Body)
	}
	m := r.Map(t)
	return m["current_balance"].(string), m["available_balance"].(string)
}

// errorBody checks the one error shape and returns its detail.
func errorBody(t *testing.T, r servicetest.Response) (detail, code, attr string) {
	t.Helper()
	var e struct {
		Type   string `json:"type"`
		Detail string `json:"detail"`
		Errors []struct {
			Code   string  `json:"code"`
			Detail string  `json:"detail"`
			Attr   *string `json:"attr"`
		} `json:"errors"`
		RequestID string `json:"request_id"`
	}
	r.JSON(t, &e)
	if e.Detail == "" || len(e.Errors) == 0 || e.RequestID == "" || e.Type == "" {
		t.Fatalf("error body lacks detail/errors/request_id/type: %s", r.Body)
	}
	if r.Header.Get("X-Request-Id") != e.RequestID {
		t.Fatalf("X-Request-Id %q differs from body request_id %q", r.Header.Get("X-Request-Id"), e.RequestID)
	}
	if e.Errors[0].Attr != nil {
		attr = *e.Errors[0].Attr
	}
	return e.Detail, e.Errors[0].Code, attr
}

// freeAddr is a loopback address no one listens on, for a service whose callback
// URLs must be known before it starts.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// checkLedger runs the ledger check (storage.CheckLedger, as paysvc ledger check)
// on the service's schema: every currency sums to zero, every wallet equals its
// entries, no available balance is negative and every wallet's held funds are its
// open holds. It fails with the report. The check holds at any instant (each
// batch commits whole), so a caller waits for the outcomes it expects only so
// that the check covers them.
func checkLedger(t *testing.T, env *servicetest.Env) {
	t.Helper()
	rep, err := storage.CheckLedger(context.Background(), env.Schema.DB)
	if err != nil {
		t.Fatalf("ledger check: %v", err)
	}
	if !rep.OK {
		t.Fatalf("ledger check failed: %+v", rep)
	}
}

// ledgerOK is checkLedger on the bundle's service.
func ledgerOK(t *testing.T, b *bundle) {
	t.Helper()
	checkLedger(t, b.env)
}

// statusUntil asks /api/v1/payment/status/ with body (and headers) until done holds
// for its invoice, within limit, and returns the whole answer.
func statusUntil(t *testing.T, env *servicetest.Env, limit time.Duration, body map[string]any, done func(inv map[string]any) bool, headers ...string) map[string]any {
	t.Helper()
	var m map[string]any
	waittest.Eventually(t, limit, func() (bool, string) {
		r := env.Do("POST", "/api/v1/payment/status/", body, headers...)
		if r.Status != 200 {
			t.Fatalf("status: %d %s", r.Status, r.Body)
		}
		m = r.Map(t)
		inv := m["invoice"].(map[string]any)
		return done(inv), fmt.Sprintf("invoice %v is %v: %s", body["invoice_id"], inv["state"], r.Body)
	})
	return m
}

// isFinal: the invoice has its outcome.
func isFinal(inv map[string]any) bool { return inv["state"] == "COMPLETE" || inv["state"] == "FAILED" }

// waitInvoice polls the status endpoint until the invoice reaches a final state.
func (b *bundle) waitInvoice(t *testing.T, id string) map[string]any {
	t.Helper()
	m := statusUntil(t, b.env, 20*time.Second, map[string]any{"invoice_id": id}, isFinal, servicetest.Bearer(b.secret)...)
	return m["invoice"].(map[string]any)
}

// pageStatus polls /payment/status as a hosted page does (the checkout's id and
// signature, no key) until the invoice is final.
func pageStatus(t *testing.T, env *servicetest.Env, checkoutID, signature any, invoiceID string) map[string]any {
	t.Helper()
	return statusUntil(t, env, 20*time.Second, map[string]any{"invoice_id": invoiceID, "checkout_id": checkoutID, "signature": signature}, isFinal)
}

// promptTo waits for the fake Daraja to have taken a prompt to phone that ok
// accepts (nil: any), and returns it.
func promptTo(t *testing.T, fake *mpesatest.FakeDaraja, phone string, ok func(mpesatest.FakeSTKRequest) bool) mpesatest.FakeSTKRequest {
	t.Helper()
	var got mpesatest.FakeSTKRequest
	waittest.Eventually(t, 20*time.Second, func() (bool, string) {
		for _, r := range fake.Requests() {
			if r.PhoneNumber == phone && (ok == nil || ok(r)) {
				got = r
				return true, ""
			}
		}
		return false, fmt.Sprintf("no prompt to %s reached Daraja (%d prompts)", phone, len(fake.Requests()))
	})
	return got
}

// recordedFor accepts a prompt whose reference the invoice recorded.
func recordedFor(t *testing.T, env *servicetest.Env, invoiceID string) func(mpesatest.FakeSTKRequest) bool {
	return func(req mpesatest.FakeSTKRequest) bool {
		ref, err := storage.InvoiceByCheckoutRequest(context.Background(), env.Schema.DB, req.CheckoutRequestID)
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil && ref.InvoiceID == invoiceID
	}
}

// daraja says how startDaraja wires the fake Daraja.
type daraja struct {
	token string // the secret path part of the callback URLs
	live  bool   // the live environment (else sandbox)
	b2c   bool   // B2C payouts through the fake as well as STK prompts
}

// startDaraja starts a service whose M-Pesa is the wire-level fake Daraja, with
// its callbacks at d.token on the service's own address (known before it starts),
// then mutate. It returns the service, the fake and the service's base URL.
func startDaraja(t *testing.T, d daraja, mutate func(*service.Config)) (*servicetest.Env, *mpesatest.FakeDaraja, string) {
	t.Helper()
	fake := mpesatest.NewFakeDaraja()
	t.Cleanup(fake.Close)
	addr := freeAddr(t)
	base := "http://" + addr
	env := servicetest.Start(t, func(c *service.Config) {
		if d.live {
			c.Environment, c.API.Environment = "live", "live"
		}
		c.HTTPAddr = addr
		c.Daraja = fake.Config(base + "/api/v1/payment/mpesa/callback/" + d.token)
		if d.b2c {
			c.Daraja = fake.B2CConfig(base+"/api/v1/payment/mpesa/callback/"+d.token,
				base+"/api/v1/send-money/mpesa/result/"+d.token, base+"/api/v1/send-money/mpesa/timeout/"+d.token)
		}
		c.API.DarajaCallbackToken = d.token
		if mutate != nil {
			mutate(c)
		}
	})
	return env, fake, base
}
