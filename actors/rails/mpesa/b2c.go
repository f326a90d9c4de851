package mpesa

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"paysvc/actors/values/money"
)

// PathB2C is Daraja's B2C payment request (M-Pesa business to customer).
const PathB2C = "/mpesa/b2c/v3/paymentrequest"

// CommandBusinessPayment is the B2C CommandID of a plain business payment to a
// registered M-Pesa customer.
const CommandBusinessPayment = "BusinessPayment"

// maxRemarks bounds Remarks and Occassion (Daraja allows 100 characters).
const maxRemarks = 100

// ErrNotSent marks an ErrUnavailable whose request never left this process (the
// connection to Daraja could not be made): nothing was paid, and sending again is
// safe. Any other ErrUnavailable may have been processed.
var ErrNotSent = errors.New("mpesa: request not sent")

// B2CRequest is one payout to a phone.
type B2CRequest struct {
	// TransactionID is ours and unique. It is sent as OriginatorConversationID,
	// which Daraja's result carries back, so the result maps straight to it.
	TransactionID string
	Phone         string       // 254XXXXXXXXX
	Amount        money.Amount // whole shillings
	// Remarks (default "Payout") and Occasion are labels, cut to 100 characters.
	Remarks, Occasion string
}

// B2CAccepted is Daraja's acceptance of a B2C request: the payment is queued,
// its outcome comes later to the ResultURL.
type B2CAccepted struct {
	ConversationID, OriginatorConversationID, Description string
}

// B2C is the live M-Pesa B2C adapter over Daraja. It is safe for concurrent use.
type B2C struct{ d *Daraja }

// NewB2C checks the B2C part of cfg (and the OAuth credentials) and returns the
// adapter. hc may be nil (a client with a 30 s timeout is used). The STK fields
// of cfg are not needed.
func NewB2C(cfg DarajaConfig, hc *http.Client) (*B2C, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("mpesa: daraja b2c config: "+format, a...)
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
	case cfg.B2CInitiatorName == "":
		return nil, bad("B2CInitiatorName is empty")
	case cfg.B2CSecurityCredential == "":
		return nil, bad("B2CSecurityCredential is empty")
	case !shortCodeRE.MatchString(cfg.B2CShortcode):
		return nil, bad("B2CShortcode %s must be 5 to 7 digits", clip(cfg.B2CShortcode))
	}
	for name, u := range map[string]string{"B2CResultURL": cfg.B2CResultURL, "B2CTimeoutURL": cfg.B2CTimeoutURL} {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			return nil, bad("%s must be an absolute http(s) URL", name)
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &B2C{d: &Daraja{cfg: cfg, base: strings.TrimRight(cfg.BaseURL, "/"), hc: hc, fetching: make(chan struct{}, 1)}}, nil
}

// String describes the adapter without its secrets.
func (b *B2C) String() string { return "mpesa.B2C(" + b.d.cfg.String() + ")" }

type b2cBody struct {
	OriginatorConversationID string      `json:"OriginatorConversationID"`
	InitiatorName            string      `json:"InitiatorName"`
	SecurityCredential       string      `json:"SecurityCredential"`
	CommandID                string      `json:"CommandID"`
	Amount                   json.Number `json:"Amount"`
	PartyA                   string      `json:"PartyA"`
	PartyB                   string      `json:"PartyB"`
	Remarks                  string      `json:"Remarks"`
	QueueTimeOutURL          string      `json:"QueueTimeOutURL"`
	ResultURL                string      `json:"ResultURL"`
	Occassion                string      `json:"Occassion"` // sic: Daraja's spelling
}

type b2cAnswer struct {
	ConversationID           string          `json:"ConversationID"`
	OriginatorConversationID string          `json:"OriginatorConversationID"`
	ResponseCode             json.RawMessage `json:"ResponseCode"`
	ResponseDescription      string          `json:"ResponseDescription"`
}

// Pay sends one B2C payment request. Acceptance means M-Pesa queued the payment;
// its outcome arrives at B2CResultURL (ParseB2CResult).
//
// Errors say whether money may have moved:
//   - ErrInvalidRequest, ErrAuth, or ErrUnavailable with ErrNotSent: nothing
//     was sent (or Daraja refused the token before looking at the payment).
//   - *APIError wrapping ErrRejected: Daraja answered 4xx with its error body,
//     or 200 with a ResponseCode other than "0". Nothing is paid.
//   - any other error (ErrUnavailable: a timeout, a broken connection, a 5xx,
//     an unreadable answer): unknown. The payment may be made; sending it again
//     could pay twice.
func (b *B2C) Pay(ctx context.Context, req B2CRequest) (B2CAccepted, error) {
	d := b.d
	if req.TransactionID == "" {
		return B2CAccepted{}, fmt.Errorf("%w: empty TransactionID", ErrInvalidRequest)
	}
	if !phoneRE.MatchString(req.Phone) {
		return B2CAccepted{}, fmt.Errorf("%w: phone %s is not 254 followed by 9 digits", ErrInvalidRequest, clip(req.Phone))
	}
	cents, err := req.Amount.Cents()
	if err != nil || cents <= 0 {
		return B2CAccepted{}, fmt.Errorf("%w: amount %s must be positive", ErrInvalidRequest, req.Amount)
	}
	if cents%100 != 0 {
		return B2CAccepted{}, fmt.Errorf("%w: amount %s is not whole shillings", ErrInvalidRequest, req.Amount)
	}
	remarks := strings.TrimSpace(req.Remarks)
	if remarks == "" {
		remarks = "Payout"
	}
	status, body, err := d.call(ctx, "b2c", PathB2C, b2cBody{
		OriginatorConversationID: req.TransactionID,
		InitiatorName:            d.cfg.B2CInitiatorName,
		SecurityCredential:       d.cfg.B2CSecurityCredential,
		CommandID:                CommandBusinessPayment,
		Amount:                   json.Number(strconv.FormatInt(cents/100, 10)),
		PartyA:                   d.cfg.B2CShortcode,
		PartyB:                   req.Phone,
		Remarks:                  cut(remarks, maxRemarks),
		QueueTimeOutURL:          d.cfg.B2CTimeoutURL,
		ResultURL:                d.cfg.B2CResultURL,
		Occassion:                cut(req.Occasion, maxRemarks),
	})
	if err != nil {
		return B2CAccepted{}, err
	}
	switch {
	case status >= 500:
		// Whatever the body says, a server error does not prove the payment was
		// not queued.
		msg := http.StatusText(status)
		if e, ok := parseErrorBody(body); ok {
			msg = e.ErrorCode + " " + d.redact(e.ErrorMessage)
		}
		return B2CAccepted{}, fmt.Errorf("%w: daraja b2c: HTTP %d: %s", ErrUnavailable, status, clip(msg))
	case status != http.StatusOK:
		if e, ok := parseErrorBody(body); ok && status >= 400 {
			return B2CAccepted{}, &APIError{Op: "b2c", HTTPStatus: status, Code: e.ErrorCode, Message: d.redact(e.ErrorMessage)}
		}
		return B2CAccepted{}, fmt.Errorf("%w: daraja b2c: HTTP %d with an unreadable answer", ErrUnavailable, status)
	}
	var a b2cAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return B2CAccepted{}, fmt.Errorf("%w: daraja b2c: HTTP 200 with an unreadable answer", ErrUnavailable)
	}
	code, err := stringToken(a.ResponseCode)
	if err != nil {
		return B2CAccepted{}, fmt.Errorf("%w: daraja b2c: answer without a ResponseCode", ErrUnavailable)
	}
	if code != "0" {
		return B2CAccepted{}, &APIError{Op: "b2c", HTTPStatus: status, Code: code, Message: d.redact(a.ResponseDescription)}
	}
	return B2CAccepted{ConversationID: a.ConversationID, OriginatorConversationID: a.OriginatorConversationID,
		Description: a.ResponseDescription}, nil
}

// notSent reports whether a transport error happened before the request could
// be written: the connection itself failed.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// ---- Result ----

// ErrBadB2CResult wraps every ParseB2CResult error.
var ErrBadB2CResult = errors.New("mpesa: malformed B2C result")

// B2CResult is the outcome of a B2C payment, as Daraja POSTs it to the ResultURL.
type B2CResult struct {
	// OriginatorConversationID is our TransactionID.
	OriginatorConversationID, ConversationID string
	Code                                     int    // ResultCode; 0 = paid
	Description                              string // ResultDesc
	// Receipt is the M-Pesa transaction id (TransactionReceipt, else
	// TransactionID); on success it is never empty.
	Receipt string
	// Amount is TransactionAmount on success (zero when absent).
	Amount money.Amount
	// ReceiverName and ReceiverPhone come from ReceiverPartyPublicName
	// ("254712345678 - JANE DOE") on success.
	ReceiverName, ReceiverPhone string
}

// Success reports whether the payment was made.
func (r B2CResult) Success() bool { return r.Code == CodeSuccess }

type b2cParam struct {
	Key   *string         `json:"Key"`
	Value json.RawMessage `json:"Value"`
}

// b2cParams is Daraja's ResultParameter: an array of {Key, Value}, or a single
// object when there is one.
type b2cParams []b2cParam

func (p *b2cParams) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var one b2cParam
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*p = b2cParams{one}
		return nil
	}
	var many []b2cParam
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*p = many
	return nil
}

// eachParam hands use the value of each parameter named in keys, in the order
// given; the others are skipped. A parameter without a Key, one of keys named
// twice, or an error of use ends the walk with that error.
func eachParam(params b2cParams, keys []string, use func(key string, value json.RawMessage) error) error {
	seen := map[string]bool{}
	for i, p := range params {
		if p.Key == nil {
			return fmt.Errorf("ResultParameter %d has no Key", i)
		}
		key := *p.Key
		if !slices.Contains(keys, key) {
			continue
		}
		if seen[key] {
			return fmt.Errorf("ResultParameter %s appears twice", key)
		}
		seen[key] = true
		if err := use(key, p.Value); err != nil {
			return err
		}
	}
	return nil
}

type b2cEnvelope struct {
	Result *struct {
		ResultCode               json.RawMessage `json:"ResultCode"`
		ResultDesc               *string         `json:"ResultDesc"`
		OriginatorConversationID *string         `json:"OriginatorConversationID"`
		ConversationID           *string         `json:"ConversationID"`
		TransactionID            *string         `json:"TransactionID"`
		ResultParameters         *struct {
			ResultParameter b2cParams `json:"ResultParameter"`
		} `json:"ResultParameters"`
	} `json:"Result"`
}

// ParseB2CResult decodes the body Daraja POSTs to the B2C ResultURL:
//
//	{"Result":{"ResultType":0,"ResultCode":0,"ResultDesc":"The service request is processed successfully.",
//	  "OriginatorConversationID":"...","ConversationID":"AG_...","TransactionID":"NLJ41HAY6Q",
//	  "ResultParameters":{"ResultParameter":[{"Key":"TransactionAmount","Value":10},
//	    {"Key":"TransactionReceipt","Value":"NLJ41HAY6Q"},
//	    {"Key":"ReceiverPartyPublicName","Value":"254708374149 - John Doe"}, ...]},
//	  "ReferenceData":{"ReferenceItem":{"Key":"QueueTimeoutURL","Value":"..."}}}}
//
// A failure carries no ResultParameters. The shape is checked strictly (unknown
// extra fields are tolerated); errors wrap ErrBadB2CResult. Amounts are read from
// the JSON token's text, never through float64.
func ParseB2CResult(body []byte) (B2CResult, error) {
	bad := refusal[B2CResult](ErrBadB2CResult)
	var env b2cEnvelope
	if problem := decodeCallback(body, &env, "result"); problem != "" {
		return bad("%s", problem)
	}
	res := env.Result
	switch {
	case res == nil:
		return bad("no Result object")
	case res.OriginatorConversationID == nil || *res.OriginatorConversationID == "":
		return bad("no OriginatorConversationID")
	case res.ResultDesc == nil:
		return bad("no ResultDesc")
	}
	code, err := intToken(res.ResultCode)
	if err != nil {
		return bad("ResultCode: %v", err)
	}
	r := B2CResult{OriginatorConversationID: *res.OriginatorConversationID, Code: code, Description: *res.ResultDesc}
	if res.ConversationID != nil {
		r.ConversationID = *res.ConversationID
	}
	if code != CodeSuccess {
		return r, nil
	}
	if res.TransactionID != nil {
		r.Receipt = *res.TransactionID
	}
	if res.ResultParameters != nil {
		// Balances, dates and anything new are skipped.
		err := eachParam(res.ResultParameters.ResultParameter, []string{"TransactionReceipt", "TransactionAmount", "ReceiverPartyPublicName"},
			func(key string, value json.RawMessage) error {
				text, err := scalarToken(value)
				if err != nil {
					return fmt.Errorf("ResultParameter %s: %v", key, err)
				}
				switch key {
				case "TransactionReceipt":
					r.Receipt = text
				case "TransactionAmount":
					a, err := money.Parse(text)
					if err != nil {
						return fmt.Errorf("ResultParameter TransactionAmount: %v", err)
					}
					if a.Sign() <= 0 {
						return fmt.Errorf("ResultParameter TransactionAmount %s is not positive", a)
					}
					r.Amount = a
				case "ReceiverPartyPublicName":
					phone, name, found := strings.Cut(text, " - ")
					if found {
						r.ReceiverPhone, r.ReceiverName = strings.TrimSpace(phone), strings.TrimSpace(name)
					} else {
						r.ReceiverName = strings.TrimSpace(text)
					}
				}
				return nil
			})
		if err != nil {
			return bad("%s", err)
		}
	}
	if !receiptRE.MatchString(r.Receipt) {
		return bad("success without an alphanumeric TransactionReceipt or TransactionID")
	}
	return r, nil
}
