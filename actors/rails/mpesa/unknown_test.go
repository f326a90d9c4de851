package mpesa_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"paysvc/actors/values/money"

	"paysvc/actors/rails/mpesa"
	"paysvc/actors/rails/mpesa/mpesatest"
	"paysvc/actors/values/nettest"
)

// When the answer to a push that Daraja took is lost or unusable, Push says the
// outcome is unknown (never refused, never "not sent"), returns the reference only
// when the answer named it, and the prompt's callback still reaches a URL that names
// its invoice, so the true outcome can be applied.
func TestDarajaPushOutcomeUnknown(t *testing.T) {
	cases := []struct {
		name    string
		fault   mpesatest.PushFault
		wantRef bool
	}{
		{"DropAnswer", mpesatest.FaultDropAnswer, false},
		{"Hang", mpesatest.FaultHang, false},
		{"CutAnswer", mpesatest.FaultCutAnswer, true},
		{"Garbage", mpesatest.FaultGarbage, false},
		{"NoCheckoutID", mpesatest.FaultNoCheckoutID, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			cr := newCallbackReceiver(t)
			d, err := mpesa.NewDaraja(f.Config(cr.srv.URL+"/cb/tok"), &http.Client{Timeout: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			inv := "INV" + strconv.Itoa(i)
			f.FaultNextPush(c.fault)
			ref, err := d.Push(context.Background(), stk(inv, "254712345678", "250"))
			if !errors.Is(err, mpesa.ErrUnavailable) || errors.Is(err, mpesa.ErrNotSent) || errors.Is(err, mpesa.ErrRejected) {
				t.Fatalf("push: %v, want an unknown outcome", err)
			}
			taken := f.Requests()
			if len(taken) != 1 {
				t.Fatalf("Daraja took %d prompts", len(taken))
			}
			if want := ""; c.wantRef {
				if ref != taken[0].CheckoutRequestID {
					t.Fatalf("reference %q, want the named %q", ref, taken[0].CheckoutRequestID)
				}
			} else if ref != want {
				t.Fatalf("reference %q from an answer that did not name one", ref)
			}
			if !strings.HasSuffix(taken[0].CallBackURL, "/cb/tok/"+inv) {
				t.Fatalf("callback URL %q does not name the invoice", taken[0].CallBackURL)
			}
			if err := f.Complete(taken[0].CheckoutRequestID, 0, "RKT0000001"); err != nil {
				t.Fatal(err)
			}
			if r := cr.next(t); !r.Success() || r.CheckoutRequestID != taken[0].CheckoutRequestID {
				t.Fatalf("callback %+v", r)
			}
		})
	}
}

// A push that certainly never reached Daraja (connection refused, rate limited) is
// ErrNotSent, safe to send again; a 4xx is a refusal, even with an unreadable body.
func TestDarajaPushNotSentOrRefused(t *testing.T) {
	f := newFake(t)
	refused := nettest.RefusingAddr(t)
	var refuse atomic.Int32
	tr := http.DefaultTransport.(*http.Transport).Clone()
	base := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if refuse.Load() > 0 {
			return base(ctx, network, refused) // a real connection refused
		}
		return base(ctx, network, addr)
	}
	tr.DisableKeepAlives = true
	d, err := mpesa.NewDaraja(f.Config("https://example.test/cb"), &http.Client{Transport: tr, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := d.Push(ctx, stk("INV0", "254712345678", "10")); err != nil { // a token is cached
		t.Fatal(err)
	}
	refuse.Store(1)
	_, err = d.Push(ctx, stk("INV1", "254712345678", "10"))
	if !errors.Is(err, mpesa.ErrNotSent) || !errors.Is(err, mpesa.ErrUnavailable) {
		t.Fatalf("refused connection: %v, want ErrNotSent", err)
	}
	refuse.Store(0)
	if n := len(f.Requests()); n != 1 {
		t.Fatalf("Daraja took %d prompts, want 1", n)
	}

	f.FailNextPush(http.StatusTooManyRequests, "", "")
	if _, err := d.Push(ctx, stk("INV2", "254712345678", "10")); !errors.Is(err, mpesa.ErrNotSent) {
		t.Fatalf("429: %v, want ErrNotSent", err)
	}
	f.FailNextPush(http.StatusBadRequest, "", "")
	var apiErr *mpesa.APIError
	if _, err := d.Push(ctx, stk("INV3", "254712345678", "10")); !errors.Is(err, mpesa.ErrRejected) || !errors.As(err, &apiErr) || apiErr.HTTPStatus != 400 {
		t.Fatalf("unreadable 400: %v, want a refusal", err)
	}
	f.FailNextPush(http.StatusBadGateway, "", "")
	if _, err := d.Push(ctx, stk("INV4", "254712345678", "10")); !errors.Is(err, mpesa.ErrUnavailable) || errors.Is(err, mpesa.ErrNotSent) || errors.Is(err, mpesa.ErrRejected) {
		t.Fatalf("unreadable 502: %v, want unknown", err)
	}
}

// A callback whose Amount differs from what was asked is reported as sent: the
// receiver compares it with its invoice.
func TestFakeCompletePaid(t *testing.T) {
	f := newFake(t)
	cr := newCallbackReceiver(t)
	d := newDaraja(t, f.Config(cr.srv.URL))
	id, err := d.Push(context.Background(), stk("INV1", "254712345678", "250"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CompletePaid(id, "RKT0000002", "25"); err != nil {
		t.Fatal(err)
	}
	if r := cr.next(t); !r.Success() || !r.Amount.Equal(money.MustParse("25")) || r.Receipt != "RKT0000002" {
		t.Fatalf("callback %+v", r)
	}
}
