package mpesatest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// Daraja's wire format, written here from Safaricom's documentation rather
// than taken from package mpesa: a fake that borrowed the adapter's paths,
// password or limits would agree with the adapter's mistakes instead of
// catching them.

// Endpoints.
const (
	pathOAuth             = "/oauth/v1/generate"
	pathSTKPush           = "/mpesa/stkpush/v1/processrequest"
	pathSTKQuery          = "/mpesa/stkpushquery/v1/query"
	pathB2C               = "/mpesa/b2c/v3/paymentrequest"
	pathTransactionStatus = "/mpesa/transactionstatus/v1/query"
)

// Field values Daraja accepts.
const (
	transactionPayBill       = "CustomerPayBillOnline"
	transactionBuyGoods      = "CustomerBuyGoodsOnline"
	commandBusinessPayment   = "BusinessPayment"
	commandTransactionStatus = "TransactionStatusQuery"
)

// Daraja's error codes.
const (
	errCodeInvalidToken = "404.001.03"   // "Invalid Access Token"
	errCodeProcessing   = "500.001.1001" // with "The transaction is being processed"
)

// Daraja's limits: AccountReference 12 characters, TransactionDesc 13,
// Remarks and Occassion 100; request bodies here are bounded at 64 KiB.
const (
	maxAccountRef  = 12
	maxDescription = 13
	maxRemarks     = 100
	maxCallback    = 64 << 10
)

var (
	intRE   = regexp.MustCompile(`^-?\d{1,9}$`)
	phoneRE = regexp.MustCompile(`^254\d{9}$`)
)

// codeSuccess is M-Pesa's ResultCode of a payment made.
const codeSuccess = 0

// resultDescs are the ResultDesc texts M-Pesa sends with each code.
var resultDescs = map[int]string{
	0:    "The service request is processed successfully.",
	1:    "The balance is insufficient for the transaction.",
	1001: "Unable to lock subscriber, a transaction is already in process for the current subscriber",
	1019: "Transaction has expired",
	1032: "Request cancelled by user",
	1037: "DS timeout user cannot be reached",
	2001: "The initiator information is invalid.",
}

func resultDesc(code int) string {
	if d, ok := resultDescs[code]; ok {
		return d
	}
	return "M-Pesa result code " + strconv.Itoa(code)
}

// eat is East Africa Time, UTC+3 all year, in which Daraja writes timestamps.
var eat = time.FixedZone("EAT", 3*60*60)

const timestampLayout = "20060102150405"

func timestamp(t time.Time) string { return t.In(eat).Format(timestampLayout) }

// password is Daraja's STK password: base64(shortcode+passkey+timestamp).
func password(shortCode, passkey, ts string) string {
	return base64.StdEncoding.EncodeToString([]byte(shortCode + passkey + ts))
}

// errorBody is Daraja's error answer.
type errorBody struct {
	RequestID    string `json:"requestId"`
	ErrorCode    string `json:"errorCode"`
	ErrorMessage string `json:"errorMessage"`
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
		return "", errors.New("not a number or a string")
	}
}

const (
	digits   = "0123456789"
	receipts = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
)

// randomString returns n characters of alphabet from crypto/rand.
func randomString(n int, alphabet string) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("mpesatest: crypto/rand failed: %v", err))
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
