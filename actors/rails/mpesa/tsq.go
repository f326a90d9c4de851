package mpesa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"paysvc/actors/values/money"
)

// PathTransactionStatus is Daraja's Transaction Status query.
const PathTransactionStatus = "/mpesa/transactionstatus/v1/query"

// CommandTransactionStatus is the only CommandID of a Transaction Status query.
const CommandTransactionStatus = "TransactionStatusQuery"

// identifierShortcode is the IdentifierType of an organisation shortcode.
const identifierShortcode = "4"

type tsqBody struct {
	Initiator          string `json:"Initiator"`
	SecurityCredential string `json:"SecurityCredential"`
	CommandID          string `json:"CommandID"`
	TransactionID      string `json:"TransactionID"`
	// The B2C request's OriginatorConversationID (our transaction id). Daraja's
	// documentation names the field OriginatorConversationID; some versions
	// spell it OriginalConversationID. Both carry the same value.
	OriginatorConversationID string `json:"OriginatorConversationID"`
	OriginalConversationID   string `json:"OriginalConversationID"`
	PartyA                   string `json:"PartyA"`
	IdentifierType           string `json:"IdentifierType"`
	ResultURL                string `json:"ResultURL"`
	QueueTimeOutURL          string `json:"QueueTimeOutURL"`
	Remarks                  string `json:"Remarks"`
	Occasion                 string `json:"Occasion"`
}

// QueryStatus asks Daraja's Transaction Status API for the outcome of the B2C
// payment whose OriginatorConversationID is transactionID. The answer is
// asynchronous: Daraja POSTs it to B2CStatusURL (ParseStatusResult). Occasion
// carries transactionID so the answer always names it. A nil error means only
// that Daraja took the query. A query moves no money and may be repeated.
func (b *B2C) QueryStatus(ctx context.Context, transactionID string) error {
	d := b.d
	if transactionID == "" || len(transactionID) > maxRemarks {
		return fmt.Errorf("%w: transaction id must have 1 to %d characters", ErrInvalidRequest, maxRemarks)
	}
	if p, err := url.Parse(d.cfg.B2CStatusURL); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
		return fmt.Errorf("%w: B2CStatusURL must be an absolute http(s) URL", ErrInvalidRequest)
	}
	status, body, err := d.call(ctx, "tsq", PathTransactionStatus, tsqBody{
		Initiator:                d.cfg.B2CInitiatorName,
		SecurityCredential:       d.cfg.B2CSecurityCredential,
		CommandID:                CommandTransactionStatus,
		OriginatorConversationID: transactionID,
		OriginalConversationID:   transactionID,
		PartyA:                   d.cfg.B2CShortcode,
		IdentifierType:           identifierShortcode,
		ResultURL:                d.cfg.B2CStatusURL,
		QueueTimeOutURL:          d.cfg.B2CTimeoutURL,
		Remarks:                  "Payout status",
		Occasion:                 transactionID,
	})
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		msg := http.StatusText(status)
		if e, ok := parseErrorBody(body); ok {
			msg = e.ErrorCode + " " + d.redact(e.ErrorMessage)
		}
		return fmt.Errorf("%w: daraja transaction status: HTTP %d: %s", ErrUnavailable, status, clip(msg))
	}
	var a b2cAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return fmt.Errorf("%w: daraja transaction status: HTTP 200 with an unreadable answer", ErrUnavailable)
	}
	if code, err := stringToken(a.ResponseCode); err != nil || code != "0" {
		return &APIError{Op: "tsq", HTTPStatus: status, Code: code, Message: d.redact(a.ResponseDescription)}
	}
	return nil
}

// ErrBadStatusResult wraps every ParseStatusResult error.
var ErrBadStatusResult = errors.New("mpesa: malformed transaction status result")

// StatusResult is Daraja's answer to a Transaction Status query.
type StatusResult struct {
	// TransactionID is ours: the Occasion of the query (ReferenceData), else the
	// result's OriginatorConversationID.
	TransactionID, ConversationID string
	// Code is the query's ResultCode as sent ("0" = answered; failures may be
	// numbers or codes such as "R000002").
	Code        string
	Description string // ResultDesc
	// Status is the TransactionStatus parameter ("Completed", "Failed", ...).
	Status string
	// Final: the outcome is known. Paid tells which; a final failure moved no money.
	Final, Paid bool
	// Receipt (ReceiptNo) and PartyName (CreditPartyName without its phone) on Paid.
	Receipt, PartyName string
	Amount             money.Amount // Amount, when given
}

// Final statuses that mean the payment was not made. Anything else but
// "Completed" (pending, a failed query, a ResultCode such as "transaction not
// found" that Daraja does not document as final) is unknown: the transaction
// stays PROCESSING.
var statusFailed = map[string]bool{"Failed": true, "Declined": true}

type statusEnvelope struct {
	Result *struct {
		ResultCode               json.RawMessage `json:"ResultCode"`
		ResultDesc               *string         `json:"ResultDesc"`
		OriginatorConversationID *string         `json:"OriginatorConversationID"`
		ConversationID           *string         `json:"ConversationID"`
		ResultParameters         *struct {
			ResultParameter b2cParams `json:"ResultParameter"`
		} `json:"ResultParameters"`
		ReferenceData *struct {
			ReferenceItem b2cParams `json:"ReferenceItem"`
		} `json:"ReferenceData"`
	} `json:"Result"`
}

// ParseStatusResult decodes the body Daraja POSTs to the ResultURL of a
// Transaction Status query:
//
//	{"Result":{"ResultType":0,"ResultCode":0,"ResultDesc":"The service request is processed successfully.",
//	  "OriginatorConversationID":"...","ConversationID":"AG_...","TransactionID":"...",
//	  "ResultParameters":{"ResultParameter":[{"Key":"TransactionStatus","Value":"Completed"},
//	    {"Key":"ReceiptNo","Value":"NLJ41HAY6Q"},{"Key":"Amount","Value":100},
//	    {"Key":"DebitPartyName","Value":"600000 - Org"},{"Key":"CreditPartyName","Value":"254708374149 - John Doe"}, ...]},
//	  "ReferenceData":{"ReferenceItem":{"Key":"Occasion","Value":"<transaction id>"}}}}
//
// Errors wrap ErrBadStatusResult. A Completed status without an alphanumeric
// ReceiptNo is an error.
func ParseStatusResult(body []byte) (StatusResult, error) {
	bad := refusal[StatusResult](ErrBadStatusResult)
	var env statusEnvelope
	if problem := decodeCallback(body, &env, "result"); problem != "" {
		return bad("%s", problem)
	}
	res := env.Result
	if res == nil {
		return bad("no Result object")
	}
	if res.ResultDesc == nil {
		return bad("no ResultDesc")
	}
	code, err := stringToken(res.ResultCode)
	if err != nil {
		return bad("ResultCode: %v", err)
	}
	r := StatusResult{Code: code, Description: *res.ResultDesc}
	if res.ConversationID != nil {
		r.ConversationID = *res.ConversationID
	}
	if res.ReferenceData != nil {
		for _, it := range res.ReferenceData.ReferenceItem {
			if it.Key != nil && *it.Key == "Occasion" {
				if v, err := scalarToken(it.Value); err == nil {
					r.TransactionID = v
				}
			}
		}
	}
	if r.TransactionID == "" && res.OriginatorConversationID != nil {
		r.TransactionID = *res.OriginatorConversationID
	}
	if r.TransactionID == "" {
		return bad("neither an Occasion nor an OriginatorConversationID")
	}
	if code != "0" {
		return r, nil // the query failed: nothing is known
	}
	if res.ResultParameters != nil {
		err := eachParam(res.ResultParameters.ResultParameter, []string{"TransactionStatus", "ReceiptNo", "Amount", "CreditPartyName"},
			func(key string, value json.RawMessage) error {
				text, err := scalarToken(value)
				if err != nil {
					if key == "TransactionStatus" || key == "ReceiptNo" {
						return fmt.Errorf("ResultParameter %s: %v", key, err)
					}
					return nil
				}
				switch key {
				case "TransactionStatus":
					r.Status = strings.TrimSpace(text)
				case "ReceiptNo":
					r.Receipt = strings.TrimSpace(text)
				case "Amount":
					if a, err := money.Parse(text); err == nil {
						r.Amount = a
					}
				case "CreditPartyName":
					if _, name, found := strings.Cut(text, " - "); found && strings.TrimSpace(name) != "" {
						r.PartyName = strings.TrimSpace(name)
					} else {
						r.PartyName = strings.TrimSpace(text)
					}
				}
				return nil
			})
		if err != nil {
			return bad("%s", err)
		}
	}
	switch {
	case r.Status == "Completed":
		if !receiptRE.MatchString(r.Receipt) {
			return bad("Completed without an alphanumeric ReceiptNo")
		}
		r.Final, r.Paid = true, true
	case statusFailed[r.Status]:
		r.Final = true
		r.Receipt, r.PartyName = "", ""
	}
	return r, nil
}
