package mpesa

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"paysvc/actors/values/money"
)

// Daraja paths.
const (
	PathOAuth    = "/oauth/v1/generate"
	PathSTKPush  = "/mpesa/stkpush/v1/processrequest"
	PathSTKQuery = "/mpesa/stkpushquery/v1/query"
)

// Transaction types of M-Pesa Express.
const (
	TransactionPayBill  = "CustomerPayBillOnline"
	TransactionBuyGoods = "CustomerBuyGoodsOnline"
)

// Daraja error codes this package acts on.
const (
	errCodeInvalidToken = "404.001.03"   // "Invalid Access Token"
	errCodeProcessing   = "500.001.1001" // with "The transaction is being processed" (also used for other errors)
)

// DarajaConfig configures the live adapter. ConsumerSecret and Passkey are
// secrets: they never appear in errors or in String.
type DarajaConfig struct {
	// BaseURL is Daraja's root, e.g. https://sandbox.safaricom.co.ke or
	// https://api.safaricom.co.ke.
	BaseURL                     string
	ConsumerKey, ConsumerSecret string
	// ShortCode is the paybill (or the store number for buy goods), Passkey
	// the Lipa Na M-Pesa Online passkey issued with it.
	ShortCode, Passkey string
	// CallbackURL receives Daraja's result callbacks (decode them with
	// ParseCallback). Daraja requires a public https URL.
	CallbackURL string
	// CallbackKey keys the per-prompt MAC (CallbackMAC) appended to each
	// prompt's callback URL after its invoice id; a secret. Empty: prompts carry
	// no MAC, and the API proves their outcomes with the STK query instead.
	CallbackKey []byte
	// TransactionType defaults to CustomerPayBillOnline; PartyB defaults to
	// ShortCode (set it to the till number for CustomerBuyGoodsOnline).
	TransactionType, PartyB string
	// B2CInitiatorName and B2CSecurityCredential (the initiator's password
	// encrypted with M-Pesa's public key) authorise B2C payouts from the
	// B2CShortcode. Both are secrets. Daraja posts B2C outcomes to B2CResultURL
	// and queue timeouts to B2CTimeoutURL. Used by NewB2C only.
	B2CInitiatorName, B2CSecurityCredential string
	B2CShortcode                            string
	B2CResultURL, B2CTimeoutURL             string
	// B2CStatusURL receives the answers of Transaction Status queries
	// (B2C.QueryStatus); empty: no query can be sent.
	B2CStatusURL string
	// Now is the clock for timestamps and token expiry. Default time.Now.
	Now func() time.Time
}

// String masks the secrets so a logged config leaks nothing.
func (c DarajaConfig) String() string {
	return fmt.Sprintf("DarajaConfig{BaseURL:%s ConsumerKey:%s ConsumerSecret:%s ShortCode:%s Passkey:%s CallbackURL:%s CallbackKey:%s TransactionType:%s PartyB:%s"+
		" B2CInitiatorName:%s B2CSecurityCredential:%s B2CShortcode:%s B2CResultURL:%s B2CTimeoutURL:%s B2CStatusURL:%s}",
		c.BaseURL, mask(c.ConsumerKey), mask(c.ConsumerSecret), c.ShortCode, mask(c.Passkey), MaskToken(c.CallbackURL), mask(string(c.CallbackKey)), c.TransactionType, c.PartyB,
		mask(c.B2CInitiatorName), mask(c.B2CSecurityCredential), c.B2CShortcode, MaskToken(c.B2CResultURL), MaskToken(c.B2CTimeoutURL), MaskToken(c.B2CStatusURL))
}

// GoString masks the secrets for %#v too.
func (c DarajaConfig) GoString() string { return c.String() }

func mask(s string) string {
	if s == "" {
		return `""`
	}
	return "***"
}

// MaskToken hides the last path segment of a callback URL: the secret token that
// is the only thing authenticating Daraja's callbacks. Anything that prints a
// callback URL (config, logs, errors) prints it through here.
func MaskToken(u string) string {
	if i := strings.LastIndexByte(u, '/'); i >= 0 && i < len(u)-1 && strings.Contains(u[:i], "://") {
		return u[:i+1] + "****"
	}
	return u
}

// Daraja is the live M-Pesa Express rail over Safaricom's Daraja API. It is
// safe for concurrent use.
type Daraja struct {
	cfg  DarajaConfig
	base string // BaseURL without a trailing slash
	hc   *http.Client

	fetching chan struct{} // a one-slot lock around token fetches that honours ctx
	mu       sync.Mutex    // guards token and expiry
	token    string
	expiry   time.Time
}

var _ Rail = (*Daraja)(nil)

var shortCodeRE = regexp.MustCompile(`^\d{5,7}$`)

// NewDaraja checks cfg and returns the adapter. hc may be nil (a client with
// a 30 s timeout is used).
func NewDaraja(cfg DarajaConfig, hc *http.Client) (*Daraja, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("mpesa: daraja config: "+format, a...)
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" || base.User != nil {
		return nil, bad("BaseURL must be an http(s) URL without credentials")
	}
	switch {
	case cfg.ConsumerKey == "":
		return nil, bad("ConsumerKey is empty")
	case cfg.ConsumerSecret == "":
		return nil, bad("ConsumerSecret is empty")
	case cfg.Passkey == "":
		return nil, bad("Passkey is empty")
	case !shortCodeRE.MatchString(cfg.ShortCode):
		return nil, bad("ShortCode %s must be 5 to 7 digits", clip(cfg.ShortCode))
	}
	cb, err := url.Parse(cfg.CallbackURL)
	if err != nil || (cb.Scheme != "https" && cb.Scheme != "http") || cb.Host == "" {
		return nil, bad("CallbackURL must be an absolute http(s) URL")
	}
	if cfg.TransactionType == "" {
		cfg.TransactionType = TransactionPayBill
	}
	if cfg.TransactionType != TransactionPayBill && cfg.TransactionType != TransactionBuyGoods {
		return nil, bad("TransactionType %s is not %s or %s", clip(cfg.TransactionType), TransactionPayBill, TransactionBuyGoods)
	}
	if cfg.PartyB == "" {
		cfg.PartyB = cfg.ShortCode
	}
	if !shortCodeRE.MatchString(cfg.PartyB) {
		return nil, bad("PartyB %s must be 5 to 7 digits", clip(cfg.PartyB))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Daraja{
		cfg:      cfg,
		base:     strings.TrimRight(cfg.BaseURL, "/"),
		hc:       hc,
		fetching: make(chan struct{}, 1),
	}, nil
}

// String describes the adapter without its secrets.
func (d *Daraja) String() string { return "mpesa.Daraja(" + d.cfg.String() + ")" }

// APIError is an error answer from Daraja: an error body
// ({requestId, errorCode, errorMessage}) or a ResponseCode other than "0".
// It wraps ErrRejected (or ErrAuth for the token endpoint).
type APIError struct {
	Op         string // "token", "push", "query" or "b2c"
	HTTPStatus int
	Code       string // errorCode or ResponseCode
	Message    string // errorMessage or ResponseDescription (secrets removed)
	auth       bool
}

func (e *APIError) Error() string {
	return fmt.Sprintf("mpesa: daraja %s: HTTP %d: %s %s", e.Op, e.HTTPStatus, e.Code, clip(e.Message))
}

// Unwrap makes errors.Is(err, ErrRejected) (or ErrAuth) work.
func (e *APIError) Unwrap() error {
	if e.auth {
		return ErrAuth
	}
	return ErrRejected
}

// errorBody is Daraja's error answer.
type errorBody struct {
	RequestID    string `json:"requestId"`
	ErrorCode    string `json:"errorCode"`
	ErrorMessage string `json:"errorMessage"`
}

func parseErrorBody(b []byte) (errorBody, bool) {
	var e errorBody
	if json.Unmarshal(b, &e) != nil || e.ErrorCode == "" {
		return errorBody{}, false
	}
	return e, true
}

// redact removes every credential this adapter holds from s: text that came
// back from the network (or a transport error) goes through it before it
// reaches an error message.
func (d *Daraja) redact(s string) string {
	d.mu.Lock()
	tok := d.token
	d.mu.Unlock()
	basic := base64.StdEncoding.EncodeToString([]byte(d.cfg.ConsumerKey + ":" + d.cfg.ConsumerSecret))
	secrets := []string{basic, d.cfg.ConsumerSecret, d.cfg.Passkey, d.cfg.B2CSecurityCredential, tok}
	// Daraja's error texts may quote the callback URLs we sent, token included.
	for _, u := range []string{d.cfg.CallbackURL, d.cfg.B2CResultURL, d.cfg.B2CTimeoutURL, d.cfg.B2CStatusURL} {
		if m := MaskToken(u); m != u {
			secrets = append(secrets, u[len(m)-len("****"):])
		}
	}
	for _, secret := range secrets {
		if len(secret) >= 4 {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	return s
}

// ---- OAuth ----

// accessToken returns a cached token, or fetches one. One fetch runs at a
// time; callers that arrive meanwhile wait for it and use its token.
func (d *Daraja) accessToken(ctx context.Context) (string, error) {
	if tok := d.cached(); tok != "" {
		return tok, nil
	}
	select {
	case d.fetching <- struct{}{}:
	case <-ctx.Done():
		return "", fmt.Errorf("%w: waiting for the token: %w", ErrAuth, ctx.Err())
	}
	defer func() { <-d.fetching }()
	if tok := d.cached(); tok != "" {
		return tok, nil
	}
	tok, expiry, err := d.fetchToken(ctx)
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	d.token, d.expiry = tok, expiry
	d.mu.Unlock()
	return tok, nil
}

func (d *Daraja) cached() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.token != "" && d.cfg.Now().Before(d.expiry) {
		return d.token
	}
	return ""
}

// invalidate drops tok if it is still the cached token (Daraja refused it).
func (d *Daraja) invalidate(tok string) {
	d.mu.Lock()
	if d.token == tok {
		d.token = ""
	}
	d.mu.Unlock()
}

func (d *Daraja) fetchToken(ctx context.Context) (string, time.Time, error) {
	start := d.cfg.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+PathOAuth+"?grant_type=client_credentials", nil)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: building the token request", ErrAuth)
	}
	req.SetBasicAuth(d.cfg.ConsumerKey, d.cfg.ConsumerSecret)
	req.Header.Set("Accept", "application/json")
	resp, err := d.hc.Do(req)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: token endpoint unreachable: %s", ErrAuth, d.redact(err.Error()))
	}
	body, err := readBody(resp)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: reading the token answer: %s", ErrAuth, d.redact(err.Error()))
	}
	if resp.StatusCode != http.StatusOK {
		e := &APIError{Op: "token", HTTPStatus: resp.StatusCode, auth: true}
		if eb, ok := parseErrorBody(body); ok {
			e.Code, e.Message = eb.ErrorCode, d.redact(eb.ErrorMessage)
		} else {
			e.Message = http.StatusText(resp.StatusCode)
		}
		return "", time.Time{}, e
	}
	var tr struct {
		AccessToken string          `json:"access_token"`
		ExpiresIn   json.RawMessage `json:"expires_in"` // Daraja sends a string ("3599")
	}
	if err := json.Unmarshal(body, &tr); err != nil || tr.AccessToken == "" {
		return "", time.Time{}, fmt.Errorf("%w: token answer without access_token", ErrAuth)
	}
	ttl, err := intToken(tr.ExpiresIn)
	if err != nil || ttl <= 0 {
		return "", time.Time{}, fmt.Errorf("%w: token answer with a bad expires_in", ErrAuth)
	}
	life := time.Duration(ttl) * time.Second
	// Refresh a minute early (half the life for very short tokens), so a
	// token is never sent in its last seconds. The clock starts before the
	// request, which errs on the early side too.
	margin := time.Minute
	if life <= 2*time.Minute {
		margin = life / 2
	}
	return tr.AccessToken, start.Add(life - margin), nil
}

// ---- Requests ----

// call POSTs payload to path with a bearer token. A refused token (Daraja
// says "Invalid Access Token") is dropped and the call made once more with
// a new one: Daraja did not process the first attempt.
func (d *Daraja) call(ctx context.Context, op, path string, payload any) (int, []byte, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: encoding the %s request: %v", ErrInvalidRequest, op, err)
	}
	for attempt := 0; ; attempt++ {
		tok, err := d.accessToken(ctx)
		if err != nil {
			return 0, nil, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.base+path, bytes.NewReader(b))
		if err != nil {
			return 0, nil, fmt.Errorf("%w: building the %s request", ErrInvalidRequest, op)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		resp, err := d.hc.Do(req)
		if err != nil {
			if notSent(err) {
				return 0, nil, fmt.Errorf("%w: %w: daraja %s: %s", ErrUnavailable, ErrNotSent, op, d.redact(err.Error()))
			}
			return 0, nil, fmt.Errorf("%w: daraja %s: %s", ErrUnavailable, op, d.redact(err.Error()))
		}
		body, err := readBody(resp)
		if err != nil {
			return 0, nil, fmt.Errorf("%w: daraja %s: reading the answer: %s", ErrUnavailable, op, d.redact(err.Error()))
		}
		if invalidToken(resp.StatusCode, body) {
			d.invalidate(tok)
			if attempt == 0 {
				continue
			}
			// A fresh token refused too: a credentials problem, not a
			// refusal of this payment.
			e := &APIError{Op: op, HTTPStatus: resp.StatusCode, Code: errCodeInvalidToken, Message: "Invalid Access Token", auth: true}
			if eb, ok := parseErrorBody(body); ok {
				e.Code, e.Message = eb.ErrorCode, d.redact(eb.ErrorMessage)
			}
			return 0, nil, e
		}
		return resp.StatusCode, body, nil
	}
}

func invalidToken(status int, body []byte) bool {
	if status == http.StatusUnauthorized {
		return true
	}
	e, ok := parseErrorBody(body)
	return ok && (e.ErrorCode == errCodeInvalidToken || strings.Contains(strings.ToLower(e.ErrorMessage), "invalid access token"))
}

// maxBody bounds what is read from Daraja (and from a callback).
const maxBody = 1 << 20

func readBody(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxBody {
		return nil, errors.New("answer larger than 1 MiB")
	}
	return b, nil
}

// rejection turns a non-success answer into an error: an APIError when
// Daraja said what went wrong, ErrUnavailable when the answer is unreadable
// (a gateway page, say) and the outcome therefore unknown.
func (d *Daraja) rejection(op string, status int, body []byte) error {
	if e, ok := parseErrorBody(body); ok {
		return &APIError{Op: op, HTTPStatus: status, Code: e.ErrorCode, Message: d.redact(e.ErrorMessage)}
	}
	return fmt.Errorf("%w: daraja %s: HTTP %d with an unreadable answer", ErrUnavailable, op, status)
}

type stkPushBody struct {
	BusinessShortCode string      `json:"BusinessShortCode"`
	Password          string      `json:"Password"`
	Timestamp         string      `json:"Timestamp"`
	TransactionType   string      `json:"TransactionType"`
	Amount            json.Number `json:"Amount"`
	PartyA            string      `json:"PartyA"`
	PartyB            string      `json:"PartyB"`
	PhoneNumber       string      `json:"PhoneNumber"`
	CallBackURL       string      `json:"CallBackURL"`
	AccountReference  string      `json:"AccountReference"`
	TransactionDesc   string      `json:"TransactionDesc"`
}

type stkPushAnswer struct {
	MerchantRequestID   string          `json:"MerchantRequestID"`
	CheckoutRequestID   string          `json:"CheckoutRequestID"`
	ResponseCode        json.RawMessage `json:"ResponseCode"`
	ResponseDescription string          `json:"ResponseDescription"`
	CustomerMessage     string          `json:"CustomerMessage"`
}

// Push sends the STK prompt and returns Daraja's CheckoutRequestID. The
// outcome arrives at the prompt's callback URL (CallbackURL/<InvoiceID>/<MAC>,
// so a callback names its invoice even when the answer to Push was lost, and
// proves it is the answer to our prompt: CallbackMAC; ParseCallback) or
// through Query.
//
// Errors: ErrInvalidRequest (nothing sent), ErrAuth (no token; nothing
// sent), *APIError wrapping ErrRejected (Daraja refused, or answered 4xx; no
// prompt), ErrUnavailable with ErrNotSent (no connection could be made, or
// Daraja answered 429: nothing sent, sending again is safe), other
// ErrUnavailable (unknown: a timeout or lost connection after the request was
// written, an unreadable answer, an acceptance without a CheckoutRequestID; a
// prompt may have been sent). With an unknown outcome the returned reference is
// not empty when the unusable answer still named the prompt's
// CheckoutRequestID: Query can then learn its outcome.
func (d *Daraja) Push(ctx context.Context, req STKRequest) (ref string, err error) {
	p, err := prepare(req)
	if err != nil {
		return "", err
	}
	segments := []string{p.InvoiceID}
	var mac string
	if len(d.cfg.CallbackKey) > 0 {
		mac = CallbackMAC(d.cfg.CallbackKey, p.InvoiceID)
		segments = append(segments, mac)
	}
	cbURL, err := url.JoinPath(d.cfg.CallbackURL, segments...)
	if err != nil {
		return "", fmt.Errorf("%w: callback URL of invoice %s", ErrInvalidRequest, clip(p.InvoiceID))
	}
	if mac != "" {
		// Daraja's error texts may quote the URL we sent: the MAC must not reach a log.
		defer func() {
			var ae *APIError
			if errors.As(err, &ae) {
				ae.Message = strings.ReplaceAll(ae.Message, mac, "[redacted]")
			}
		}()
	}
	ts := Timestamp(d.cfg.Now())
	status, body, err := d.call(ctx, "push", PathSTKPush, stkPushBody{
		BusinessShortCode: d.cfg.ShortCode,
		Password:          Password(d.cfg.ShortCode, d.cfg.Passkey, ts),
		Timestamp:         ts,
		TransactionType:   d.cfg.TransactionType,
		Amount:            json.Number(strconv.FormatInt(p.shillings, 10)),
		PartyA:            p.Phone,
		PartyB:            d.cfg.PartyB,
		PhoneNumber:       p.Phone,
		CallBackURL:       cbURL,
		AccountReference:  p.AccountRef,
		TransactionDesc:   p.Description,
	})
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", d.pushRejection(status, body)
	}
	var a stkPushAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return namedCheckout(body), fmt.Errorf("%w: daraja push: HTTP 200 with an unreadable answer", ErrUnavailable)
	}
	code, err := stringToken(a.ResponseCode)
	if err != nil {
		return a.CheckoutRequestID, fmt.Errorf("%w: daraja push: answer without a ResponseCode", ErrUnavailable)
	}
	if code != "0" {
		return "", &APIError{Op: "push", HTTPStatus: status, Code: code, Message: d.redact(a.ResponseDescription)}
	}
	if a.CheckoutRequestID == "" {
		// Accepted: the customer may be paying. Only the callback (which names the
		// invoice in its URL) can tell.
		return "", fmt.Errorf("%w: daraja push: accepted without a CheckoutRequestID", ErrUnavailable)
	}
	return a.CheckoutRequestID, nil
}

// pushRejection classifies a non-200 answer to a push. A 4xx was refused before
// Daraja accepted anything (a readable error body says why); 429 (rate limited)
// means not processed, so it may be sent again; an unreadable 5xx or other answer
// leaves the outcome unknown.
func (d *Daraja) pushRejection(status int, body []byte) error {
	switch {
	case status == http.StatusTooManyRequests:
		return fmt.Errorf("%w: %w: daraja push: HTTP 429", ErrUnavailable, ErrNotSent)
	case status >= 400 && status < 500 && status != http.StatusRequestTimeout:
		if _, ok := parseErrorBody(body); !ok {
			return &APIError{Op: "push", HTTPStatus: status, Code: strconv.Itoa(status), Message: http.StatusText(status)}
		}
	}
	return d.rejection("push", status, body)
}

// checkoutRE finds a CheckoutRequestID in an answer that is not valid JSON (cut
// short, say): if Daraja named the prompt, Query can learn its outcome.
var checkoutRE = regexp.MustCompile(`"CheckoutRequestID"\s*:\s*"([A-Za-z0-9_-]{1,64})"`)

func namedCheckout(body []byte) string {
	if m := checkoutRE.FindSubmatch(body); m != nil {
		return string(m[1])
	}
	return ""
}

type stkQueryBody struct {
	BusinessShortCode string `json:"BusinessShortCode"`
	Password          string `json:"Password"`
	Timestamp         string `json:"Timestamp"`
	CheckoutRequestID string `json:"CheckoutRequestID"`
}

type stkQueryAnswer struct {
	ResponseCode        json.RawMessage `json:"ResponseCode"`
	ResponseDescription string          `json:"ResponseDescription"`
	MerchantRequestID   string          `json:"MerchantRequestID"`
	CheckoutRequestID   string          `json:"CheckoutRequestID"`
	ResultCode          json.RawMessage `json:"ResultCode"` // a string ("1032") in Daraja's answers
	ResultDesc          string          `json:"ResultDesc"`
}

// Query asks Daraja for the outcome of a prompt whose callback never came.
// pending is true while the customer has not answered yet ("The transaction
// is being processed"). A final r has Stage FINAL, Code and Description, but
// no Receipt or Amount: Daraja's STK query does not return them.
func (d *Daraja) Query(ctx context.Context, checkoutRequestID string) (r Result, pending bool, err error) {
	if checkoutRequestID == "" {
		return Result{}, false, fmt.Errorf("%w: empty CheckoutRequestID", ErrInvalidRequest)
	}
	ts := Timestamp(d.cfg.Now())
	status, body, err := d.call(ctx, "query", PathSTKQuery, stkQueryBody{
		BusinessShortCode: d.cfg.ShortCode,
		Password:          Password(d.cfg.ShortCode, d.cfg.Passkey, ts),
		Timestamp:         ts,
		CheckoutRequestID: checkoutRequestID,
	})
	if err != nil {
		return Result{}, false, err
	}
	if status != http.StatusOK {
		if e, ok := parseErrorBody(body); ok && e.ErrorCode == errCodeProcessing &&
			strings.Contains(strings.ToLower(e.ErrorMessage), "being processed") {
			return Result{}, true, nil
		}
		return Result{}, false, d.rejection("query", status, body)
	}
	var a stkQueryAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return Result{}, false, fmt.Errorf("%w: daraja query: HTTP 200 with an unreadable answer", ErrUnavailable)
	}
	code, err := stringToken(a.ResponseCode)
	if err != nil {
		return Result{}, false, fmt.Errorf("%w: daraja query: answer without a ResponseCode", ErrUnavailable)
	}
	if code != "0" {
		return Result{}, false, &APIError{Op: "query", HTTPStatus: status, Code: code, Message: d.redact(a.ResponseDescription)}
	}
	rc, err := intToken(a.ResultCode)
	if err != nil {
		return Result{}, false, fmt.Errorf("%w: daraja query: answer without a valid ResultCode", ErrUnavailable)
	}
	if a.CheckoutRequestID != "" && a.CheckoutRequestID != checkoutRequestID {
		return Result{}, false, fmt.Errorf("%w: daraja query: answer is for another CheckoutRequestID", ErrUnavailable)
	}
	return Result{
		Stage:             StageFinal,
		Code:              rc,
		Description:       a.ResultDesc,
		CheckoutRequestID: checkoutRequestID,
	}, false, nil
}

// ---- Callback ----

// ErrBadCallback wraps every ParseCallback error.
var ErrBadCallback = errors.New("mpesa: malformed STK callback")

// maxCallback bounds a callback body; real ones are under 1 KiB.
const maxCallback = 64 << 10

// refusal is how a parser of one of Daraja's bodies refuses it: the zero T and
// an error wrapping sentinel, so a caller tells a malformed body by errors.Is.
func refusal[T any](sentinel error) func(format string, a ...any) (T, error) {
	return func(format string, a ...any) (T, error) {
		var zero T
		return zero, fmt.Errorf("%w: "+format, append([]any{sentinel}, a...)...)
	}
}

// decodeCallback decodes a Daraja callback body into v: at most maxCallback bytes,
// exactly one JSON object. It returns what is wrong ("" when nothing), naming the
// body as "the <noun> JSON", never quoting it.
func decodeCallback(body []byte, v any, noun string) string {
	if len(body) > maxCallback {
		return fmt.Sprintf("body larger than %d bytes", maxCallback)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return "not the " + noun + " JSON: " + jsonProblem(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "data after the JSON object"
	}
	return ""
}

var (
	intRE     = regexp.MustCompile(`^-?\d{1,9}$`)
	receiptRE = regexp.MustCompile(`^[A-Za-z0-9]{1,32}$`)
	phoneNoRE = regexp.MustCompile(`^\d{9,15}$`)
	dateRE    = regexp.MustCompile(`^\d{14}$`)
)

type callbackEnvelope struct {
	Body *struct {
		StkCallback *struct {
			MerchantRequestID *string         `json:"MerchantRequestID"`
			CheckoutRequestID *string         `json:"CheckoutRequestID"`
			ResultCode        json.RawMessage `json:"ResultCode"`
			ResultDesc        *string         `json:"ResultDesc"`
			CallbackMetadata  *struct {
				Item []struct {
					Name  *string         `json:"Name"`
					Value json.RawMessage `json:"Value"`
				} `json:"Item"`
			} `json:"CallbackMetadata"`
		} `json:"stkCallback"`
	} `json:"Body"`
}

// ParseCallback decodes the body Daraja POSTs to CallbackURL:
//
//	{"Body":{"stkCallback":{"MerchantRequestID":"...","CheckoutRequestID":"ws_CO_...",
//	  "ResultCode":0,"ResultDesc":"...","CallbackMetadata":{"Item":[
//	  {"Name":"Amount","Value":1},{"Name":"MpesaReceiptNumber","Value":"..."},
//	  {"Name":"Balance"},{"Name":"TransactionDate","Value":20231210133416},
//	  {"Name":"PhoneNumber","Value":254708374149}]}}}}
//
// It returns a FINAL Result with Code, Description, CheckoutRequestID and, on
// success, Receipt, Amount and Phone. InvoiceID is empty: the caller maps
// CheckoutRequestID to its invoice. The shape is checked strictly (unknown
// extra fields are tolerated); errors wrap ErrBadCallback. Amounts are read
// from the JSON token's text, never through float64.
func ParseCallback(body []byte) (Result, error) {
	bad := refusal[Result](ErrBadCallback)
	var env callbackEnvelope
	if problem := decodeCallback(body, &env, "callback"); problem != "" {
		return bad("%s", problem)
	}
	if env.Body == nil {
		return bad("no Body object")
	}
	cb := env.Body.StkCallback
	switch {
	case cb == nil:
		return bad("no Body.stkCallback object")
	case cb.MerchantRequestID == nil || *cb.MerchantRequestID == "":
		return bad("no MerchantRequestID")
	case cb.CheckoutRequestID == nil || *cb.CheckoutRequestID == "":
		return bad("no CheckoutRequestID")
	case cb.ResultDesc == nil:
		return bad("no ResultDesc")
	}
	code, err := intToken(cb.ResultCode)
	if err != nil {
		return bad("ResultCode: %v", err)
	}
	r := Result{
		Stage:             StageFinal,
		Code:              code,
		Description:       *cb.ResultDesc,
		CheckoutRequestID: *cb.CheckoutRequestID,
	}
	if code != CodeSuccess {
		// A failure carries no metadata worth reading (Daraja sends none).
		return r, nil
	}
	if cb.CallbackMetadata == nil {
		return bad("success without CallbackMetadata")
	}
	seen := map[string]bool{}
	var haveAmount bool
	for i, it := range cb.CallbackMetadata.Item {
		if it.Name == nil {
			return bad("Item %d has no Name", i)
		}
		name := *it.Name
		switch name {
		case "Amount", "MpesaReceiptNumber", "PhoneNumber", "TransactionDate":
		default:
			continue // Balance (usually without a Value) and anything new
		}
		if seen[name] {
			return bad("Item %s appears twice", name)
		}
		seen[name] = true
		text, err := scalarToken(it.Value)
		if err != nil {
			return bad("Item %s: %v", name, err)
		}
		switch name {
		case "Amount":
			a, err := money.Parse(text)
			if err != nil {
				return bad("Item Amount: %v", err)
			}
			if a.Sign() <= 0 {
				return bad("Item Amount %s is not positive", a)
			}
			r.Amount, haveAmount = a, true
		case "MpesaReceiptNumber":
			if !receiptRE.MatchString(text) {
				return bad("Item MpesaReceiptNumber %s is not alphanumeric", clip(text))
			}
			r.Receipt = text
		case "PhoneNumber":
			if !phoneNoRE.MatchString(text) {
				return bad("Item PhoneNumber %s is not a phone number", clip(text))
			}
			r.Phone = text
		case "TransactionDate":
			if !dateRE.MatchString(text) {
				return bad("Item TransactionDate %s is not YYYYMMDDHHmmss", clip(text))
			}
		}
	}
	if !haveAmount {
		return bad("success without an Amount item")
	}
	if r.Receipt == "" {
		return bad("success without a MpesaReceiptNumber item")
	}
	return r, nil
}

// jsonProblem describes a decoding error without repeating the input.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at offset %d", se.Offset)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "the body"
		}
		return fmt.Sprintf("%s has the wrong type (%s)", field, te.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "empty or truncated"
	default:
		return "invalid"
	}
}

// scalarToken returns the text of a JSON number or string token: the number
// exactly as written (never through float64), or the string's contents.
func scalarToken(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", errors.New("missing")
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", errors.New("bad string")
		}
		return s, nil
	case c == '-' || ('0' <= c && c <= '9'):
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", errors.New("bad number")
		}
		return n.String(), nil
	default:
		return "", errors.New("the Value field is not a number or a string")
	}
}

// intToken reads an integer sent as a JSON number or a numeric string.
func intToken(raw json.RawMessage) (int, error) {
	s, err := scalarToken(raw)
	if err != nil {
		return 0, err
	}
	if !intRE.MatchString(s) {
		return 0, fmt.Errorf("%s is not an integer", clip(s))
	}
	return strconv.Atoi(s)
}

// stringToken reads a code sent as a JSON string or number ("0" or 0).
func stringToken(raw json.RawMessage) (string, error) {
	s, err := scalarToken(raw)
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", errors.New("empty")
	}
	return s, nil
}
