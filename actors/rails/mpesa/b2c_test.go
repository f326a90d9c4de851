package mpesa_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"paysvc/actors/values/money"

	"paysvc/actors/rails/mpesa"
	"paysvc/actors/rails/mpesa/mpesatest"
)

func newB2C(t *testing.T, cfg mpesa.DarajaConfig) *mpesa.B2C {
	t.Helper()
	b, err := mpesa.NewB2C(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func b2cReq(id, phone, amount string) mpesa.B2CRequest {
	return mpesa.B2CRequest{TransactionID: id, Phone: phone, Amount: money.MustParse(amount), Remarks: "Salary", Occasion: id}
}

// resultReceiver decodes B2C results POSTed by FakeDaraja with ParseB2CResult.
func resultReceiver(t *testing.T) (string, chan mpesa.B2CResult) {
	ch := make(chan mpesa.B2CResult, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		res, err := mpesa.ParseB2CResult(body)
		if err != nil {
			t.Errorf("result rejected: %v: %s", err, body)
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		ch <- res
		_, _ = io.WriteString(w, `{"ResultCode":0,"ResultDesc":"Accepted"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/result/tok", ch
}

func TestB2CRequestShapeAndResult(t *testing.T) {
	f := newFake(t)
	resultURL, results := resultReceiver(t)
	b := newB2C(t, f.B2CConfig("", resultURL, "https://example.test/timeout/tok"))
	acc, err := b.Pay(context.Background(), b2cReq("TXN0000001", "254712345678", "1500.00"))
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.B2CRequests()
	if len(reqs) != 1 || f.TokenRequests() != 1 {
		t.Fatalf("%d requests, %d tokens", len(reqs), f.TokenRequests())
	}
	got := reqs[0]
	checks := []struct{ name, got, want string }{
		{"OriginatorConversationID", got.OriginatorConversationID, "TXN0000001"},
		{"InitiatorName", got.InitiatorName, mpesatest.FakeB2CInitiator},
		{"SecurityCredential", got.SecurityCredential, mpesatest.FakeB2CSecurityCredential},
		{"CommandID", got.CommandID, "BusinessPayment"},
		{"Amount", got.Amount, "1500"},
		{"PartyA", got.PartyA, mpesatest.FakeB2CShortcode},
		{"PartyB", got.PartyB, "254712345678"},
		{"Remarks", got.Remarks, "Salary"},
		{"Occassion", got.Occassion, "TXN0000001"},
		{"ResultURL", got.ResultURL, resultURL},
		{"QueueTimeOutURL", got.QueueTimeOutURL, "https://example.test/timeout/tok"},
		{"ConversationID", acc.ConversationID, got.ConversationID},
		{"echoed OriginatorConversationID", acc.OriginatorConversationID, "TXN0000001"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if !strings.Contains(string(got.Raw), `"Amount":1500,`) || !strings.Contains(string(got.Raw), `"Occassion":`) {
		t.Errorf("body: %s", got.Raw)
	}

	if err := f.CompleteB2C("TXN0000001", 0); err != nil {
		t.Fatal(err)
	}
	r := <-results
	if !r.Success() || r.OriginatorConversationID != "TXN0000001" || r.ConversationID != acc.ConversationID ||
		r.Receipt == "" || !r.Amount.Equal(money.MustParse("1500")) || r.ReceiverName != mpesatest.FakeB2CRecipientName ||
		r.ReceiverPhone != "254712345678" || r.Description != mpesa.ResultDesc(0) {
		t.Errorf("parsed %+v", r)
	}
	// Daraja may deliver the same result twice: it parses the same.
	if err := f.CompleteB2C("TXN0000001", 0); err != nil {
		t.Fatal(err)
	}
	if r2 := <-results; r2.Receipt != r.Receipt || r2.ConversationID != r.ConversationID || !r2.Amount.Equal(r.Amount) {
		t.Errorf("repeat parsed %+v, want %+v", r2, r)
	}
	if err := f.CompleteB2C("TXN0000001", mpesa.CodeWrongPIN); err == nil {
		t.Error("fake accepted a second, different outcome")
	}
}

func TestB2CErrorsSayWhetherMoneyMayMove(t *testing.T) {
	f := newFake(t)
	b := newB2C(t, f.B2CConfig("", "https://example.test/r/t", "https://example.test/t/t"))
	ctx := context.Background()
	var apiErr *mpesa.APIError

	if _, err := b.Pay(ctx, b2cReq("T1", "0712345678", "100")); !errors.Is(err, mpesa.ErrInvalidRequest) {
		t.Errorf("local phone: %v", err)
	}
	if _, err := b.Pay(ctx, b2cReq("T1", "254712345678", "100.50")); !errors.Is(err, mpesa.ErrInvalidRequest) {
		t.Errorf("cents: %v", err)
	}
	if len(f.B2CRequests()) != 0 {
		t.Fatal("an invalid request reached Daraja")
	}

	f.FailNextB2C(http.StatusBadRequest, "400.002.02", "Bad Request - Invalid PartyB")
	_, err := b.Pay(ctx, b2cReq("T2", "254712345678", "100"))
	if !errors.Is(err, mpesa.ErrRejected) || !errors.As(err, &apiErr) || apiErr.Code != "400.002.02" || apiErr.Message != "Bad Request - Invalid PartyB" {
		t.Errorf("4xx refusal: %v", err)
	}
	f.FailNextB2C(http.StatusOK, "2001", "The initiator information is invalid.")
	_, err = b.Pay(ctx, b2cReq("T3", "254712345678", "100"))
	if !errors.Is(err, mpesa.ErrRejected) || !errors.As(err, &apiErr) || apiErr.Code != "2001" {
		t.Errorf("non-zero ResponseCode: %v", err)
	}

	// Unknown outcomes: never ErrRejected, never ErrNotSent.
	f.FailNextB2C(http.StatusInternalServerError, "500.003.1001", "Internal Server Error")
	f.FailNextB2C(http.StatusServiceUnavailable, "", "")
	f.FailNextB2C(0, "", "") // taken, answer lost
	for i, what := range []string{"5xx with a Daraja error", "gateway page", "dropped connection"} {
		_, err := b.Pay(ctx, b2cReq(fmt.Sprintf("U%d", i), "254712345678", "100"))
		if !errors.Is(err, mpesa.ErrUnavailable) || errors.Is(err, mpesa.ErrRejected) || errors.Is(err, mpesa.ErrNotSent) {
			t.Errorf("%s: %v", what, err)
		}
	}
	if n := len(f.B2CRequests()); n != 1 || f.B2CRequests()[0].OriginatorConversationID != "U2" {
		t.Errorf("recorded %d requests, want only the dropped one", n)
	}

	// Unreachable: not sent at all.
	dead := mpesatest.NewFakeDaraja()
	cfg := dead.B2CConfig("", "https://example.test/r/t", "https://example.test/t/t")
	dead.Close()
	cfg.BaseURL = dead.URL()
	bd := newB2C(t, cfg)
	mpesa.PrimeB2CToken(bd, "tok") // skip the token fetch: the B2C call itself fails
	if _, err := bd.Pay(ctx, b2cReq("T4", "254712345678", "100")); !errors.Is(err, mpesa.ErrNotSent) || !errors.Is(err, mpesa.ErrUnavailable) {
		t.Errorf("unreachable: %v", err)
	}
}

func TestB2CConfigCheckedAndMasked(t *testing.T) {
	good := mpesa.DarajaConfig{BaseURL: "https://sandbox.safaricom.co.ke", ConsumerKey: "k", ConsumerSecret: "s",
		B2CInitiatorName: "apiop", B2CSecurityCredential: "Zm9vYmFyYmF6c2VjcmV0", B2CShortcode: "600998",
		B2CResultURL: "https://pay.example/api/v1/send-money/mpesa/result/cbsecret42", B2CTimeoutURL: "https://pay.example/api/v1/send-money/mpesa/timeout/cbsecret42"}
	b, err := mpesa.NewB2C(good, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprint(good), fmt.Sprintf("%+v", good), fmt.Sprintf("%#v", good), fmt.Sprint(b)} {
		for _, secret := range []string{"apiop", "Zm9vYmFyYmF6c2VjcmV0", "cbsecret42"} {
			if strings.Contains(s, secret) {
				t.Errorf("printed config leaks %q: %s", secret, s)
			}
		}
	}
	for name, mut := range map[string]func(*mpesa.DarajaConfig){
		"no key":        func(c *mpesa.DarajaConfig) { c.ConsumerKey = "" },
		"no initiator":  func(c *mpesa.DarajaConfig) { c.B2CInitiatorName = "" },
		"no credential": func(c *mpesa.DarajaConfig) { c.B2CSecurityCredential = "" },
		"bad shortcode": func(c *mpesa.DarajaConfig) { c.B2CShortcode = "60099a" },
		"no result url": func(c *mpesa.DarajaConfig) { c.B2CResultURL = "" },
		"relative timeout url": func(c *mpesa.DarajaConfig) {
			c.B2CTimeoutURL = "/timeout"
		},
	} {
		c := good
		mut(&c)
		if _, err := mpesa.NewB2C(c, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestB2CErrorsNeverLeakTheCredential(t *testing.T) {
	f := newFake(t)
	b := newB2C(t, f.B2CConfig("", "https://example.test/r/t", "https://example.test/t/t"))
	f.FailNextB2C(http.StatusBadRequest, "400.002.02", "bad credential "+mpesatest.FakeB2CSecurityCredential)
	_, err := b.Pay(context.Background(), b2cReq("T1", "254712345678", "100"))
	if err == nil || strings.Contains(err.Error(), mpesatest.FakeB2CSecurityCredential) || !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("echoed credential: %v", err)
	}
}

const documentedB2CSuccess = `{"Result":{"ResultType":0,"ResultCode":0,"ResultDesc":"The service request is processed successfully.","OriginatorConversationID":"10571-7910404-1","ConversationID":"AG_20191219_00004e48cf7e3533f581","TransactionID":"NLJ41HAY6Q","ResultParameters":{"ResultParameter":[{"Key":"TransactionAmount","Value":10},{"Key":"TransactionReceipt","Value":"NLJ41HAY6Q"},{"Key":"B2CRecipientIsRegisteredCustomer","Value":"Y"},{"Key":"B2CChargesPaidAccountAvailableFunds","Value":-4510.00},{"Key":"ReceiverPartyPublicName","Value":"254708374149 - John Doe"},{"Key":"TransactionCompletedDateTime","Value":"19.12.2019 11:45:50"},{"Key":"B2CUtilityAccountAvailableFunds","Value":10116.00},{"Key":"B2CWorkingAccountAvailableFunds","Value":900000.00}]},"ReferenceData":{"ReferenceItem":{"Key":"QueueTimeoutURL","Value":"https://internalsandbox.safaricom.co.ke/mpesa/b2cresults/v1/submit"}}}}`

func TestParseB2CResultAcceptsVariants(t *testing.T) {
	cases := map[string]struct {
		body          string
		code          int
		receipt, name string
		amount        string
	}{
		"documented success": {documentedB2CSuccess, 0, "NLJ41HAY6Q", "John Doe", "10"},
		"documented failure": {`{"Result":{"ResultType":0,"ResultCode":2001,"ResultDesc":"The initiator information is invalid.","OriginatorConversationID":"29112-34801843-1","ConversationID":"AG_20191219_00006c6fddb15123addf","TransactionID":"NLJ0000000","ReferenceData":{"ReferenceItem":{"Key":"QueueTimeoutURL","Value":"https://internalsandbox.safaricom.co.ke/mpesa/b2cresults/v1/submit"}}}}`,
			2001, "", "", ""},
		"one parameter as an object, code as string": {`{"Result":{"ResultType":"0","ResultCode":"0","ResultDesc":"ok","OriginatorConversationID":"T1","ConversationID":"AG_1","TransactionID":"QKA81LK5CY","ResultParameters":{"ResultParameter":{"Key":"TransactionAmount","Value":"250.00"}}}}`,
			0, "QKA81LK5CY", "", "250"},
		"name without phone": {`{"Result":{"ResultCode":0,"ResultDesc":"ok","OriginatorConversationID":"T1","TransactionID":"X1","ResultParameters":{"ResultParameter":[{"Key":"ReceiverPartyPublicName","Value":"Jane"}]}}}`,
			0, "X1", "Jane", ""},
	}
	for name, c := range cases {
		r, err := mpesa.ParseB2CResult([]byte(c.body))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if r.Code != c.code || r.Receipt != c.receipt || r.ReceiverName != c.name || r.OriginatorConversationID == "" {
			t.Errorf("%s: %+v", name, r)
		}
		if c.amount != "" && !r.Amount.Equal(money.MustParse(c.amount)) {
			t.Errorf("%s: amount %s, want %s", name, r.Amount, c.amount)
		}
	}
	r, _ := mpesa.ParseB2CResult([]byte(documentedB2CSuccess))
	if r.ReceiverPhone != "254708374149" || r.ConversationID != "AG_20191219_00004e48cf7e3533f581" {
		t.Errorf("documented success: %+v", r)
	}
}

func TestParseB2CResultRejectsMalformed(t *testing.T) {
	res := func(fields string) string { return `{"Result":{` + fields + `}}` }
	params := func(items string) string {
		return res(`"ResultCode":0,"ResultDesc":"ok","OriginatorConversationID":"T1","TransactionID":"X1","ResultParameters":{"ResultParameter":[` + items + `]}`)
	}
	cases := map[string]string{
		"empty":                   ``,
		"not json":                `hello`,
		"null":                    `null`,
		"no Result":               `{"Body":{}}`,
		"Result not object":       `{"Result":"x"}`,
		"no originator id":        res(`"ResultCode":0,"ResultDesc":"ok","TransactionID":"X1"`),
		"empty originator id":     res(`"ResultCode":1,"ResultDesc":"x","OriginatorConversationID":""`),
		"no ResultCode":           res(`"ResultDesc":"x","OriginatorConversationID":"T1"`),
		"float ResultCode":        res(`"ResultCode":0.5,"ResultDesc":"x","OriginatorConversationID":"T1"`),
		"no ResultDesc":           res(`"ResultCode":1,"OriginatorConversationID":"T1"`),
		"success without receipt": res(`"ResultCode":0,"ResultDesc":"ok","OriginatorConversationID":"T1"`),
		"receipt with symbols":    res(`"ResultCode":0,"ResultDesc":"ok","OriginatorConversationID":"T1","TransactionID":"A B;"`),
		"amount negative":         params(`{"Key":"TransactionAmount","Value":-5}`),
		"amount 3 places":         params(`{"Key":"TransactionAmount","Value":1.005}`),
		"amount twice":            params(`{"Key":"TransactionAmount","Value":1},{"Key":"TransactionAmount","Value":2}`),
		"parameter without key":   params(`{"Value":1}`),
		"parameter bool":          params(`{"Key":"TransactionReceipt","Value":true}`),
		"trailing data":           res(`"ResultCode":1,"ResultDesc":"x","OriginatorConversationID":"T1"`) + `{}`,
		"too large":               res(`"X":"` + strings.Repeat("a", 70<<10) + `"`),
	}
	for name, body := range cases {
		r, err := mpesa.ParseB2CResult([]byte(body))
		if !errors.Is(err, mpesa.ErrBadB2CResult) {
			t.Errorf("%s: got %+v, %v; want ErrBadB2CResult", name, r, err)
			continue
		}
		if len(err.Error()) > 300 {
			t.Errorf("%s: error too long (%d bytes)", name, len(err.Error()))
		}
	}
}

func FuzzParseB2CResult(f *testing.F) {
	f.Add([]byte(documentedB2CSuccess))
	f.Add([]byte(`{"Result":{"ResultCode":2001,"ResultDesc":"x","OriginatorConversationID":"T1"}}`))
	f.Add([]byte(`{"Result":{"ResultCode":"0","ResultParameters":{"ResultParameter":{"Key":"TransactionReceipt"}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := mpesa.ParseB2CResult(body)
		if err != nil {
			if !errors.Is(err, mpesa.ErrBadB2CResult) {
				t.Fatalf("error %v does not wrap ErrBadB2CResult", err)
			}
			return
		}
		if r.OriginatorConversationID == "" || r.Success() && r.Receipt == "" || r.Amount.Sign() < 0 {
			t.Fatalf("accepted %+v", r)
		}
	})
}
