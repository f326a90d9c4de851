package mpesatest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"paysvc/actors/rails/mpesa"
)

// Credentials FakeDaraja accepts. The passkey is Safaricom's public sandbox
// passkey for shortcode 174379.
const (
	FakeConsumerKey    = "fake-consumer-key"
	FakeConsumerSecret = "fake-consumer-secret"
	FakeShortCode      = "174379"
	FakePasskey        = "bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919"
	// B2C: the initiator, its security credential and the paying shortcode,
	// and the name M-Pesa reports for every recipient.
	FakeB2CInitiator          = "fake-initiator"
	FakeB2CSecurityCredential = "fake-b2c-security-credential-0123456789"
	FakeB2CShortcode          = "600998"
	FakeB2CRecipientName      = "JANE DOE"
)

// FakeDaraja is a local HTTP server speaking Daraja's M-Pesa Express wire
// format, for tests of the Daraja adapter and of whatever uses it. It checks
// Basic auth on the token endpoint, bearer tokens, the timestamped password
// and the required fields, records every accepted STK request, and leaves
// outcomes to the test: Complete sends the callback (a real HTTP POST to the
// request's CallBackURL), Lose records an outcome only Query can see.
type FakeDaraja struct {
	srv *httptest.Server
	hc  *http.Client // for callbacks

	mu            sync.Mutex
	tokenTTL      int
	tokens        map[string]time.Time // token -> expiry
	tokenRequests int
	queries       int
	pushes        []FakeSTKRequest
	txns          map[string]*fakeTxn
	failures      []fakeFailure
	pushFaults    []PushFault

	b2cRequests   []FakeB2CRequest    // every B2C request taken, repeats included
	b2c           map[string]*fakeB2C // by OriginatorConversationID (the first request)
	b2cFailures   []fakeFailure
	statusQueries []FakeStatusQuery // every Transaction Status query taken
}

// FakeSTKRequest is one STK push FakeDaraja accepted.
type FakeSTKRequest struct {
	CheckoutRequestID, MerchantRequestID string

	BusinessShortCode, Password, Timestamp, TransactionType string
	Amount                                                  string // the JSON token's text, as sent
	PartyA, PartyB, PhoneNumber                             string
	CallBackURL, AccountReference, TransactionDesc          string
	Raw                                                     []byte // the request body
}

type fakeTxn struct {
	req     FakeSTKRequest
	done    bool
	code    int
	receipt string
}

type fakeFailure struct {
	status        int
	code, message string
}

// NewFakeDaraja starts the server. Close it when done.
func NewFakeDaraja() *FakeDaraja {
	f := &FakeDaraja{
		hc:       &http.Client{Timeout: 10 * time.Second},
		tokenTTL: 3599,
		tokens:   map[string]time.Time{},
		txns:     map[string]*fakeTxn{},
		b2c:      map[string]*fakeB2C{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc(pathOAuth, f.handleOAuth)
	mux.HandleFunc(pathSTKPush, f.handlePush)
	mux.HandleFunc(pathSTKQuery, f.handleQuery)
	mux.HandleFunc(pathB2C, f.handleB2C)
	mux.HandleFunc(pathTransactionStatus, f.handleStatusQuery)
	f.srv = httptest.NewServer(mux)
	return f
}

// URL is the server's base URL (mpesa.DarajaConfig.BaseURL).
func (f *FakeDaraja) URL() string { return f.srv.URL }

// Close stops the server.
func (f *FakeDaraja) Close() { f.srv.Close() }

// Config returns an mpesa.DarajaConfig for this server with the fake credentials.
func (f *FakeDaraja) Config(callbackURL string) mpesa.DarajaConfig {
	return mpesa.DarajaConfig{
		BaseURL:        f.URL(),
		ConsumerKey:    FakeConsumerKey,
		ConsumerSecret: FakeConsumerSecret,
		ShortCode:      FakeShortCode,
		Passkey:        FakePasskey,
		CallbackURL:    callbackURL,
	}
}

// SetTokenTTL sets expires_in (seconds) of tokens issued from now on.
func (f *FakeDaraja) SetTokenTTL(seconds int) {
	f.mu.Lock()
	f.tokenTTL = seconds
	f.mu.Unlock()
}

// ExpireTokens revokes every issued token: the next call with one gets
// "Invalid Access Token".
func (f *FakeDaraja) ExpireTokens() {
	f.mu.Lock()
	clear(f.tokens)
	f.mu.Unlock()
}

// TokenRequests counts successful token requests.
func (f *FakeDaraja) TokenRequests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokenRequests
}

// Queries counts STK queries answered (pending or not).
func (f *FakeDaraja) Queries() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queries
}

// Requests returns the accepted STK requests, oldest first.
func (f *FakeDaraja) Requests() []FakeSTKRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FakeSTKRequest(nil), f.pushes...)
}

// Request returns the accepted STK request with that CheckoutRequestID.
func (f *FakeDaraja) Request(checkoutRequestID string) (FakeSTKRequest, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.txns[checkoutRequestID]
	if !ok {
		return FakeSTKRequest{}, false
	}
	return t.req, true
}

// FailNextPush makes the next valid STK push fail with this HTTP status and
// Daraja error body; an empty errorCode sends a non-JSON body instead (a
// gateway error page). Calls queue up.
func (f *FakeDaraja) FailNextPush(status int, errorCode, errorMessage string) {
	f.mu.Lock()
	f.failures = append(f.failures, fakeFailure{status: status, code: errorCode, message: errorMessage})
	f.mu.Unlock()
}

// PushFault is a way the answer to an STK push that Daraja took goes wrong. In
// every case the prompt exists (Requests lists it, Complete and Lose decide it):
// only the caller cannot tell.
type PushFault int

// Faults of FaultNextPush.
const (
	// FaultDropAnswer takes the request and closes the connection without an
	// answer (a timeout after the request was sent, as the client sees it).
	FaultDropAnswer PushFault = iota + 1
	// FaultHang takes the request and answers nothing until the client gives up.
	FaultHang
	// FaultCutAnswer answers 200 with the JSON cut short after the
	// CheckoutRequestID (unreadable, but naming the prompt).
	FaultCutAnswer
	// FaultGarbage answers 200 with a body that is not JSON at all.
	FaultGarbage
	// FaultNoCheckoutID answers a success (ResponseCode "0") without a
	// CheckoutRequestID.
	FaultNoCheckoutID
)

// FaultNextPush makes the answer to the next valid STK push go wrong that way
// (after any FailNextPush refusals). Calls queue up.
func (f *FakeDaraja) FaultNextPush(fault PushFault) {
	f.mu.Lock()
	f.pushFaults = append(f.pushFaults, fault)
	f.mu.Unlock()
}

// CompletePaid decides a prompt as paid and POSTs a callback whose Amount item
// is paid (not the amount asked): a callback that does not match its invoice.
func (f *FakeDaraja) CompletePaid(checkoutRequestID, receipt, paid string) error {
	if _, _, err := f.decide(checkoutRequestID, codeSuccess, receipt); err != nil {
		return err
	}
	f.mu.Lock()
	t := f.txns[checkoutRequestID]
	req, receipt := t.req, t.receipt
	f.mu.Unlock()
	req.Amount = paid
	return f.postJSON(req.CallBackURL, STKCallbackBody(req, codeSuccess, receipt, time.Now()))
}

// Complete decides the outcome of a prompt and POSTs the callback to its
// CallBackURL, as Daraja does. code 0 is success; an empty receipt then gets
// a generated one. Completing again with the same outcome resends the
// callback (Daraja can deliver twice); a different outcome is an error.
// The error reports a transport failure or a non-2xx answer.
func (f *FakeDaraja) Complete(checkoutRequestID string, code int, receipt string) error {
	body, cbURL, err := f.decide(checkoutRequestID, code, receipt)
	if err != nil {
		return err
	}
	return f.postJSON(cbURL, body)
}

// postJSON POSTs a callback as Daraja does; the error reports a transport
// failure or a non-2xx answer.
func (f *FakeDaraja) postJSON(cbURL string, body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cbURL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("fakedaraja: callback request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.hc.Do(req)
	if err != nil {
		return fmt.Errorf("fakedaraja: callback POST: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("fakedaraja: callback POST answered HTTP %d", resp.StatusCode)
	}
	return nil
}

// Lose decides the outcome of a prompt without sending the callback: only
// Query can learn it.
func (f *FakeDaraja) Lose(checkoutRequestID string, code int, receipt string) error {
	_, _, err := f.decide(checkoutRequestID, code, receipt)
	return err
}

// CallbackBody returns the callback Daraja would send for that outcome,
// without recording or sending anything.
func (f *FakeDaraja) CallbackBody(checkoutRequestID string, code int, receipt string) ([]byte, error) {
	f.mu.Lock()
	t, ok := f.txns[checkoutRequestID]
	f.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("fakedaraja: unknown CheckoutRequestID %q", checkoutRequestID)
	}
	return STKCallbackBody(t.req, code, receipt, time.Now()), nil
}

func (f *FakeDaraja) decide(id string, code int, receipt string) ([]byte, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.txns[id]
	if !ok {
		return nil, "", fmt.Errorf("fakedaraja: unknown CheckoutRequestID %q", id)
	}
	if code == codeSuccess && receipt == "" {
		if t.done && t.code == code {
			receipt = t.receipt
		} else {
			receipt = randomString(10, receipts)
		}
	}
	if code != codeSuccess {
		receipt = ""
	}
	if t.done && (t.code != code || t.receipt != receipt) {
		return nil, "", fmt.Errorf("fakedaraja: %s already has outcome %d", id, t.code)
	}
	t.done, t.code, t.receipt = true, code, receipt
	return STKCallbackBody(t.req, code, receipt, time.Now()), t.req.CallBackURL, nil
}

type fakeItem struct {
	Name  string `json:"Name"`
	Value any    `json:"Value,omitempty"`
}

// STKCallbackBody is the callback Daraja sends for req's outcome code (0 is a
// payment of req.Amount with that receipt), decided at now: a seed for tests of
// callback parsing that need no server.
func STKCallbackBody(req FakeSTKRequest, code int, receipt string, now time.Time) []byte {
	cb := map[string]any{
		"MerchantRequestID": req.MerchantRequestID,
		"CheckoutRequestID": req.CheckoutRequestID,
		"ResultCode":        code,
		"ResultDesc":        resultDesc(code),
	}
	if code == codeSuccess {
		cb["CallbackMetadata"] = map[string]any{"Item": []fakeItem{
			{Name: "Amount", Value: json.Number(req.Amount)},
			{Name: "MpesaReceiptNumber", Value: receipt},
			{Name: "Balance"},
			{Name: "TransactionDate", Value: json.Number(timestamp(now))},
			{Name: "PhoneNumber", Value: json.Number(req.PhoneNumber)},
		}}
	}
	b, err := json.Marshal(map[string]any{"Body": map[string]any{"stkCallback": cb}})
	if err != nil {
		panic(fmt.Sprintf("fakedaraja: encoding a callback: %v", err))
	}
	return b
}

// ---- handlers ----

func fakeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody{
		RequestID:    randomString(5, digits) + "-" + randomString(8, digits) + "-1",
		ErrorCode:    code,
		ErrorMessage: message,
	})
}

func fakeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (f *FakeDaraja) handleOAuth(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		fakeError(w, http.StatusMethodNotAllowed, "405.001.01", "Method Not Allowed")
		return
	}
	if r.URL.Query().Get("grant_type") != "client_credentials" {
		fakeError(w, http.StatusBadRequest, "400.008.02", "Invalid grant type passed")
		return
	}
	user, pass, ok := r.BasicAuth()
	if !ok || user != FakeConsumerKey || pass != FakeConsumerSecret {
		fakeError(w, http.StatusBadRequest, "400.008.01", "Invalid Authentication passed")
		return
	}
	tok := randomString(28, receipts)
	f.mu.Lock()
	ttl := f.tokenTTL
	f.tokens[tok] = time.Now().Add(time.Duration(ttl) * time.Second)
	f.tokenRequests++
	f.mu.Unlock()
	// Daraja sends expires_in as a string.
	fakeJSON(w, map[string]string{"access_token": tok, "expires_in": strconv.Itoa(ttl)})
}

// authorized checks the bearer token and answers the refusal itself.
func (f *FakeDaraja) authorized(w http.ResponseWriter, r *http.Request) bool {
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	ok := false
	if len(h) > len(prefix) && h[:len(prefix)] == prefix {
		f.mu.Lock()
		exp, found := f.tokens[h[len(prefix):]]
		f.mu.Unlock()
		ok = found && time.Now().Before(exp)
	}
	if !ok {
		fakeError(w, http.StatusUnauthorized, errCodeInvalidToken, "Invalid Access Token")
	}
	return ok
}

// fakeFields reads a JSON object body of scalar fields.
type fakeFields struct {
	m   map[string]json.RawMessage
	bad string // first invalid field
}

func (ff *fakeFields) get(name string) string {
	s, err := scalarToken(ff.m[name])
	if err != nil || s == "" {
		ff.fail(name)
		return ""
	}
	return s
}

func (ff *fakeFields) fail(name string) {
	if ff.bad == "" {
		ff.bad = name
	}
}

// readFields decodes the body or answers 400 itself.
func readFields(w http.ResponseWriter, r *http.Request) (*fakeFields, []byte, bool) {
	if r.Method != http.MethodPost {
		fakeError(w, http.StatusMethodNotAllowed, "405.001.01", "Method Not Allowed")
		return nil, nil, false
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxCallback)); err != nil {
		fakeError(w, http.StatusBadRequest, "400.002.05", "Invalid Request Payload")
		return nil, nil, false
	}
	ff := &fakeFields{}
	if err := json.Unmarshal(buf.Bytes(), &ff.m); err != nil || ff.m == nil {
		fakeError(w, http.StatusBadRequest, "400.002.05", "Invalid Request Payload")
		return nil, nil, false
	}
	return ff, buf.Bytes(), true
}

// checkPassword validates BusinessShortCode, Timestamp and Password.
func (ff *fakeFields) checkPassword() {
	sc := ff.get("BusinessShortCode")
	ts := ff.get("Timestamp")
	pw := ff.get("Password")
	if sc != FakeShortCode {
		ff.fail("BusinessShortCode")
	}
	if _, err := time.ParseInLocation(timestampLayout, ts, eat); err != nil || len(ts) != len(timestampLayout) {
		ff.fail("Timestamp")
	}
	if pw != password(FakeShortCode, FakePasskey, ts) {
		ff.fail("Password")
	}
}

func (f *FakeDaraja) handlePush(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	ff, raw, ok := readFields(w, r)
	if !ok {
		return
	}
	ff.checkPassword()
	req := FakeSTKRequest{
		BusinessShortCode: ff.get("BusinessShortCode"),
		Password:          ff.get("Password"),
		Timestamp:         ff.get("Timestamp"),
		TransactionType:   ff.get("TransactionType"),
		Amount:            ff.get("Amount"),
		PartyA:            ff.get("PartyA"),
		PartyB:            ff.get("PartyB"),
		PhoneNumber:       ff.get("PhoneNumber"),
		CallBackURL:       ff.get("CallBackURL"),
		AccountReference:  ff.get("AccountReference"),
		TransactionDesc:   ff.get("TransactionDesc"),
		Raw:               raw,
	}
	if req.TransactionType != transactionPayBill && req.TransactionType != transactionBuyGoods {
		ff.fail("TransactionType")
	}
	if n, err := strconv.ParseInt(req.Amount, 10, 64); err != nil || n < 1 || !intRE.MatchString(req.Amount) {
		ff.fail("Amount")
	}
	if !phoneRE.MatchString(req.PartyA) {
		ff.fail("PartyA")
	}
	if !phoneRE.MatchString(req.PhoneNumber) {
		ff.fail("PhoneNumber")
	}
	if req.TransactionType == transactionPayBill && req.PartyB != FakeShortCode {
		ff.fail("PartyB")
	}
	if u, err := url.Parse(req.CallBackURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		ff.fail("CallBackURL")
	}
	if utf8.RuneCountInString(req.AccountReference) > maxAccountRef {
		ff.fail("AccountReference")
	}
	if utf8.RuneCountInString(req.TransactionDesc) > maxDescription {
		ff.fail("TransactionDesc")
	}
	if ff.bad != "" {
		fakeError(w, http.StatusBadRequest, "400.002.02", "Bad Request - Invalid "+ff.bad)
		return
	}

	f.mu.Lock()
	if len(f.failures) > 0 {
		fl := f.failures[0]
		f.failures = f.failures[1:]
		f.mu.Unlock()
		if fl.code == "" {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(fl.status)
			_, _ = w.Write([]byte("<html><body>" + http.StatusText(fl.status) + "</body></html>"))
			return
		}
		fakeError(w, fl.status, fl.code, fl.message)
		return
	}
	req.MerchantRequestID = randomString(5, digits) + "-" + randomString(8, digits) + "-1"
	req.CheckoutRequestID = mpesa.NewCheckoutRequestID(time.Now())
	f.pushes = append(f.pushes, req)
	f.txns[req.CheckoutRequestID] = &fakeTxn{req: req}
	var fault PushFault
	if len(f.pushFaults) > 0 {
		fault, f.pushFaults = f.pushFaults[0], f.pushFaults[1:]
	}
	f.mu.Unlock()

	switch fault {
	case FaultDropAnswer:
		dropConnection(w)
		return
	case FaultHang:
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		dropConnection(w)
		return
	case FaultCutAnswer:
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"MerchantRequestID":%q,"CheckoutRequestID":%q,"ResponseCo`, req.MerchantRequestID, req.CheckoutRequestID)
		return
	case FaultGarbage:
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html><body>upstream answered 200 with this page</body></html>"))
		return
	case FaultNoCheckoutID:
		fakeJSON(w, map[string]string{
			"MerchantRequestID":   req.MerchantRequestID,
			"ResponseCode":        "0",
			"ResponseDescription": "Success. Request accepted for processing",
			"CustomerMessage":     "Success. Request accepted for processing",
		})
		return
	}
	fakeJSON(w, map[string]string{
		"MerchantRequestID":   req.MerchantRequestID,
		"CheckoutRequestID":   req.CheckoutRequestID,
		"ResponseCode":        "0",
		"ResponseDescription": "Success. Request accepted for processing",
		"CustomerMessage":     "Success. Request accepted for processing",
	})
}

func (f *FakeDaraja) handleQuery(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	ff, _, ok := readFields(w, r)
	if !ok {
		return
	}
	ff.checkPassword()
	id := ff.get("CheckoutRequestID")
	if ff.bad != "" {
		fakeError(w, http.StatusBadRequest, "400.002.02", "Bad Request - Invalid "+ff.bad)
		return
	}
	f.mu.Lock()
	f.queries++
	t, found := f.txns[id]
	var snapshot fakeTxn
	if found {
		snapshot = *t
	}
	f.mu.Unlock()
	switch {
	case !found:
		fakeError(w, http.StatusBadRequest, "400.002.02", "Bad Request - Invalid CheckoutRequestID")
	case !snapshot.done:
		fakeError(w, http.StatusInternalServerError, errCodeProcessing, "The transaction is being processed")
	default:
		// Daraja's query answer carries ResultCode as a string and no receipt.
		fakeJSON(w, map[string]string{
			"ResponseCode":        "0",
			"ResponseDescription": "The service request has been accepted successsfully",
			"MerchantRequestID":   snapshot.req.MerchantRequestID,
			"CheckoutRequestID":   snapshot.req.CheckoutRequestID,
			"ResultCode":          strconv.Itoa(snapshot.code),
			"ResultDesc":          resultDesc(snapshot.code),
		})
	}
}

// ---- B2C ----

// FakeB2CRequest is one B2C payment request FakeDaraja took.
type FakeB2CRequest struct {
	OriginatorConversationID, ConversationID string

	InitiatorName, SecurityCredential, CommandID string
	Amount                                       string // the JSON token's text, as sent
	PartyA, PartyB, Remarks, Occassion           string
	QueueTimeOutURL, ResultURL                   string
	Raw                                          []byte // the request body
}

type fakeB2C struct {
	req     FakeB2CRequest
	done    bool
	code    int
	receipt string
}

// B2CConfig is Config plus the fake B2C credentials and the two B2C URLs.
func (f *FakeDaraja) B2CConfig(callbackURL, resultURL, timeoutURL string) mpesa.DarajaConfig {
	c := f.Config(callbackURL)
	c.B2CInitiatorName, c.B2CSecurityCredential, c.B2CShortcode = FakeB2CInitiator, FakeB2CSecurityCredential, FakeB2CShortcode
	c.B2CResultURL, c.B2CTimeoutURL = resultURL, timeoutURL
	return c
}

// B2CRequests returns every B2C request taken, oldest first, repeats of an
// OriginatorConversationID included (a real Daraja may pay a repeat).
func (f *FakeDaraja) B2CRequests() []FakeB2CRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FakeB2CRequest(nil), f.b2cRequests...)
}

// FailNextB2C makes the next valid B2C request fail: status 0 takes the
// request (M-Pesa will pay it) and drops the connection without an answer;
// status 200 answers a non-zero ResponseCode errorCode with errorMessage;
// otherwise as FailNextPush. Calls queue up.
func (f *FakeDaraja) FailNextB2C(status int, errorCode, errorMessage string) {
	f.mu.Lock()
	f.b2cFailures = append(f.b2cFailures, fakeFailure{status: status, code: errorCode, message: errorMessage})
	f.mu.Unlock()
}

// CompleteB2C decides the outcome of a B2C payment and POSTs the result to its
// ResultURL, as Daraja does. code 0 is success, with a generated receipt.
// Completing again with the same code resends the same result; another code is
// an error.
func (f *FakeDaraja) CompleteB2C(originatorConversationID string, code int) error {
	body, err := f.B2CResultBody(originatorConversationID, code)
	if err != nil {
		return err
	}
	f.mu.Lock()
	u := f.b2c[originatorConversationID].req.ResultURL
	f.mu.Unlock()
	return f.postJSON(u, body)
}

// B2CResultBody decides the outcome like CompleteB2C and returns the result
// body without sending it.
func (f *FakeDaraja) B2CResultBody(originatorConversationID string, code int) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.b2c[originatorConversationID]
	if !ok {
		return nil, fmt.Errorf("fakedaraja: unknown OriginatorConversationID %q", originatorConversationID)
	}
	if t.done && t.code != code {
		return nil, fmt.Errorf("fakedaraja: %s already has outcome %d", originatorConversationID, t.code)
	}
	if !t.done {
		t.done, t.code, t.receipt = true, code, randomString(10, receipts)
	}
	res := map[string]any{
		"ResultType":               0,
		"ResultCode":               code,
		"ResultDesc":               resultDesc(code),
		"OriginatorConversationID": t.req.OriginatorConversationID,
		"ConversationID":           t.req.ConversationID,
		"TransactionID":            t.receipt,
		"ReferenceData": map[string]any{"ReferenceItem": map[string]string{
			"Key": "QueueTimeoutURL", "Value": "https://internalsandbox.safaricom.co.ke/mpesa/b2cresults/v1/submit"}},
	}
	if code == codeSuccess {
		res["ResultParameters"] = map[string]any{"ResultParameter": []map[string]any{
			{"Key": "TransactionAmount", "Value": json.Number(t.req.Amount)},
			{"Key": "TransactionReceipt", "Value": t.receipt},
			{"Key": "B2CRecipientIsRegisteredCustomer", "Value": "Y"},
			{"Key": "B2CChargesPaidAccountAvailableFunds", "Value": json.Number("-4510.00")},
			{"Key": "ReceiverPartyPublicName", "Value": t.req.PartyB + " - " + FakeB2CRecipientName},
			{"Key": "TransactionCompletedDateTime", "Value": time.Now().In(eat).Format("02.01.2006 15:04:05")},
			{"Key": "B2CUtilityAccountAvailableFunds", "Value": json.Number("10116.00")},
			{"Key": "B2CWorkingAccountAvailableFunds", "Value": json.Number("900000.00")},
		}}
	}
	return json.Marshal(map[string]any{"Result": res})
}

// TimeoutB2C POSTs a queue timeout notice to the payment's QueueTimeOutURL.
func (f *FakeDaraja) TimeoutB2C(originatorConversationID string) error {
	f.mu.Lock()
	t, ok := f.b2c[originatorConversationID]
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("fakedaraja: unknown OriginatorConversationID %q", originatorConversationID)
	}
	body, err := json.Marshal(map[string]any{"Result": map[string]any{
		"ResultType": 1, "ResultCode": "SVC0001", "ResultDesc": "The service request timed out.",
		"OriginatorConversationID": t.req.OriginatorConversationID, "ConversationID": t.req.ConversationID}})
	if err != nil {
		return err
	}
	return f.postJSON(t.req.QueueTimeOutURL, body)
}

func (f *FakeDaraja) handleB2C(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	ff, raw, ok := readFields(w, r)
	if !ok {
		return
	}
	req := FakeB2CRequest{
		OriginatorConversationID: ff.get("OriginatorConversationID"),
		InitiatorName:            ff.get("InitiatorName"),
		SecurityCredential:       ff.get("SecurityCredential"),
		CommandID:                ff.get("CommandID"),
		Amount:                   ff.get("Amount"),
		PartyA:                   ff.get("PartyA"),
		PartyB:                   ff.get("PartyB"),
		Remarks:                  ff.get("Remarks"),
		QueueTimeOutURL:          ff.get("QueueTimeOutURL"),
		ResultURL:                ff.get("ResultURL"),
		Raw:                      raw,
	}
	if _, present := ff.m["Occassion"]; !present {
		ff.fail("Occassion")
	}
	req.Occassion, _ = scalarToken(ff.m["Occassion"])
	if req.InitiatorName != FakeB2CInitiator {
		ff.fail("InitiatorName")
	}
	if req.SecurityCredential != FakeB2CSecurityCredential {
		ff.fail("SecurityCredential")
	}
	switch req.CommandID {
	case commandBusinessPayment, "SalaryPayment", "PromotionPayment":
	default:
		ff.fail("CommandID")
	}
	if n, err := strconv.ParseInt(req.Amount, 10, 64); err != nil || n < 1 || !intRE.MatchString(req.Amount) {
		ff.fail("Amount")
	}
	if req.PartyA != FakeB2CShortcode {
		ff.fail("PartyA")
	}
	if !phoneRE.MatchString(req.PartyB) {
		ff.fail("PartyB")
	}
	for name, v := range map[string]string{"ResultURL": req.ResultURL, "QueueTimeOutURL": req.QueueTimeOutURL} {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			ff.fail(name)
		}
	}
	if utf8.RuneCountInString(req.Remarks) > maxRemarks || utf8.RuneCountInString(req.Occassion) > maxRemarks {
		ff.fail("Remarks")
	}
	if ff.bad != "" {
		fakeError(w, http.StatusBadRequest, "400.002.02", "Bad Request - Invalid "+ff.bad)
		return
	}

	f.mu.Lock()
	var fl *fakeFailure
	if len(f.b2cFailures) > 0 {
		fl = &f.b2cFailures[0]
		f.b2cFailures = f.b2cFailures[1:]
	}
	if fl != nil && fl.status != 0 {
		f.mu.Unlock()
		switch {
		case fl.status == http.StatusOK:
			fakeJSON(w, map[string]string{"OriginatorConversationID": req.OriginatorConversationID,
				"ResponseCode": fl.code, "ResponseDescription": fl.message})
		case fl.code == "":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(fl.status)
			_, _ = w.Write([]byte("<html><body>" + http.StatusText(fl.status) + "</body></html>"))
		default:
			fakeError(w, fl.status, fl.code, fl.message)
		}
		return
	}
	req.ConversationID = "AG_" + time.Now().In(eat).Format("20060102") + "_" + randomString(20, receipts)
	f.b2cRequests = append(f.b2cRequests, req)
	if _, seen := f.b2c[req.OriginatorConversationID]; !seen {
		f.b2c[req.OriginatorConversationID] = &fakeB2C{req: req}
	}
	f.mu.Unlock()

	if fl != nil { // taken, but the answer is lost
		dropConnection(w)
		return
	}
	fakeJSON(w, map[string]string{
		"ConversationID":           req.ConversationID,
		"OriginatorConversationID": req.OriginatorConversationID,
		"ResponseCode":             "0",
		"ResponseDescription":      "Accept the service request successfully.",
	})
}

// dropConnection closes the client's connection without an answer.
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// ---- Transaction Status ----

// FakeStatusQuery is one Transaction Status query FakeDaraja took.
type FakeStatusQuery struct {
	Initiator, SecurityCredential, CommandID, TransactionID string
	OriginatorConversationID, PartyA, IdentifierType        string
	ResultURL, QueueTimeOutURL, Remarks, Occasion           string
	Raw                                                     []byte
}

// StatusQueries returns every Transaction Status query taken, oldest first.
func (f *FakeDaraja) StatusQueries() []FakeStatusQuery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FakeStatusQuery(nil), f.statusQueries...)
}

// StatusResultBody is the answer Daraja POSTs to a status query's ResultURL for
// the B2C payment originatorConversationID with TransactionStatus status.
// "Completed" decides the payment as paid (as CompleteB2C with code 0: the same
// receipt); the result names the transaction only in ReferenceData's Occasion.
func (f *FakeDaraja) StatusResultBody(originatorConversationID, status string) ([]byte, error) {
	receipt := ""
	if status == "Completed" {
		if _, err := f.B2CResultBody(originatorConversationID, codeSuccess); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	t, ok := f.b2c[originatorConversationID]
	if ok {
		receipt = t.receipt
	}
	f.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("fakedaraja: unknown OriginatorConversationID %q", originatorConversationID)
	}
	params := []map[string]any{
		{"Key": "DebitPartyName", "Value": FakeB2CShortcode + " - Fake Org"},
		{"Key": "TransactionStatus", "Value": status},
		{"Key": "Amount", "Value": json.Number(t.req.Amount)},
		{"Key": "DebitAccountType", "Value": "Utility Account"},
		{"Key": "CreditPartyName", "Value": t.req.PartyB + " - " + FakeB2CRecipientName},
	}
	if receipt != "" {
		params = append(params, map[string]any{"Key": "ReceiptNo", "Value": receipt})
	}
	return json.Marshal(map[string]any{"Result": map[string]any{
		"ResultType": 0, "ResultCode": 0, "ResultDesc": "The service request is processed successfully.",
		"OriginatorConversationID": "TSQ-" + randomString(12, receipts),
		"ConversationID":           "AG_" + time.Now().In(eat).Format("20060102") + "_" + randomString(20, receipts),
		"TransactionID":            receipt,
		"ResultParameters":         map[string]any{"ResultParameter": params},
		"ReferenceData":            map[string]any{"ReferenceItem": map[string]any{"Key": "Occasion", "Value": originatorConversationID}},
	}})
}

func (f *FakeDaraja) handleStatusQuery(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	ff, raw, ok := readFields(w, r)
	if !ok {
		return
	}
	q := FakeStatusQuery{
		Initiator:          ff.get("Initiator"),
		SecurityCredential: ff.get("SecurityCredential"),
		CommandID:          ff.get("CommandID"),
		PartyA:             ff.get("PartyA"),
		IdentifierType:     ff.get("IdentifierType"),
		ResultURL:          ff.get("ResultURL"),
		QueueTimeOutURL:    ff.get("QueueTimeOutURL"),
		Remarks:            ff.get("Remarks"),
		Raw:                raw,
	}
	q.TransactionID, _ = scalarToken(ff.m["TransactionID"])
	q.OriginatorConversationID, _ = scalarToken(ff.m["OriginatorConversationID"])
	q.Occasion, _ = scalarToken(ff.m["Occasion"])
	if q.TransactionID == "" && q.OriginatorConversationID == "" {
		ff.fail("TransactionID")
	}
	if q.Initiator != FakeB2CInitiator {
		ff.fail("Initiator")
	}
	if q.SecurityCredential != FakeB2CSecurityCredential {
		ff.fail("SecurityCredential")
	}
	if q.CommandID != commandTransactionStatus {
		ff.fail("CommandID")
	}
	if q.PartyA != FakeB2CShortcode {
		ff.fail("PartyA")
	}
	if q.IdentifierType != "4" {
		ff.fail("IdentifierType")
	}
	for name, v := range map[string]string{"ResultURL": q.ResultURL, "QueueTimeOutURL": q.QueueTimeOutURL} {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			ff.fail(name)
		}
	}
	if ff.bad != "" {
		fakeError(w, http.StatusBadRequest, "400.002.02", "Bad Request - Invalid "+ff.bad)
		return
	}
	f.mu.Lock()
	f.statusQueries = append(f.statusQueries, q)
	f.mu.Unlock()
	fakeJSON(w, map[string]string{
		"OriginatorConversationID": "TSQ-" + randomString(12, receipts),
		"ConversationID":           "AG_" + time.Now().In(eat).Format("20060102") + "_" + randomString(20, receipts),
		"ResponseCode":             "0",
		"ResponseDescription":      "Accept the service request successfully.",
	})
}
