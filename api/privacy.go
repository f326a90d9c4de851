package api

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/refund"
	"paysvc/api/edge"
	"paysvc/topics"
)

// Payer data by principal (docs/security.md, "Payer data by principal").
//
// The public key is published in the merchant's pages and a checkout's signature
// is held by whoever has its page's link, so neither proves its holder is the
// payer. Only a secret key with view_collections reads a payer's phone, email,
// names, address or receipt in full; every other answer carries them masked (the
// hosted page's own mask) or not at all. The rule is applied where an answer is
// rendered (hidePayer), so a route added later that renders a payment session
// inherits it by calling the same function.

// seesPayers reports whether the request's principal may read payers' personal
// data in full: a secret key holding view_collections.
func seesPayers(c echo.Context) bool {
	p := edge.PrincipalOf(c)
	return p != nil && p.Kind == "secret" && p.Can(edge.PermViewCollections)
}

// mask hides the middle of a payer's value, keeping at most four characters, and
// at most a third of the value, at each end: 254712345678 becomes 2547****5678,
// enough for the payers to recognise their own number or receipt (NLJ****Y6Q),
// too little to learn someone else's. It is the one mask of payer data: the
// hosted page's prefilled phone, and every answer to a principal that does not
// see payers (hidePayer). prefilledPhone compares with it, so a mask is resolved
// only when it is exactly the stored value's.
func mask(v string) string {
	keep := min(4, len(v)/3)
	return v[:keep] + strings.Repeat("*", len(v)-2*keep) + v[len(v)-keep:]
}

// maskPtr masks a value in place (nil stays nil).
func maskPtr(v *string) *string {
	if v == nil {
		return nil
	}
	m := mask(*v)
	return &m
}

// hidePayer applies the rule to a payment session about to be answered: for a
// principal that does not see payers, the phone (customer.phone_number and
// invoice.account) and the M-Pesa receipt are masked; the email, names, country,
// zipcode, the session's comment and the customer id are left out (null). The
// customer id is left out because it is stable per payer: comparing it with the
// id of a payment the caller made itself to a guessed number or email would
// confirm the guess. The shape stays the spec's, so the SDKs parse it as before.
func hidePayer(c echo.Context, sess *sessionJSON) {
	if seesPayers(c) {
		return
	}
	sess.Invoice.Account = maskPtr(sess.Invoice.Account)
	sess.Invoice.MpesaReference = maskPtr(sess.Invoice.MpesaReference)
	cu := &sess.Customer
	cu.PhoneNumber = maskPtr(cu.PhoneNumber)
	cu.CustomerID, cu.Email, cu.FirstName, cu.LastName, cu.Country, cu.Zipcode = nil, nil, nil, nil, nil, nil
	sess.CustomerComment = nil
}

// hideStoredCustomer applies the rule to a customer record answered to a key that
// may write customers but not read them (POST /customers/ with add_collections
// alone): what the request itself set is echoed, the stored phone is masked and
// every other stored field is left out (null). The email is the request's own key.
func hideStoredCustomer(out *customerRecordJSON, sent map[string]*string) {
	keep := func(name string, v *string) *string {
		if _, ok := sent[name]; ok {
			return v
		}
		return nil
	}
	phone := out.PhoneNumber
	out.FirstName, out.LastName = keep("first_name", out.FirstName), keep("last_name", out.LastName)
	out.Reference, out.Address = keep("reference", out.Reference), keep("address", out.Address)
	out.City, out.State = keep("city", out.City), keep("state", out.State)
	out.Zipcode, out.Country = keep("zipcode", out.Zipcode), keep("country", out.Country)
	if out.PhoneNumber = keep("phone_number", phone); out.PhoneNumber == nil {
		out.PhoneNumber = maskPtr(phone)
	}
}

// hideRefundPayer applies the rule to a refund (chargeback) about to be
// answered: the refund's invoice carries the payer's phone as its account, and
// the refund permissions (add_refunds, view_refunds) are not view_collections, so
// a key made to file or follow refunds reads the phone masked, like every other
// answer to a principal that does not see payers.
func hideRefundPayer(c echo.Context, v *refund.View) {
	if seesPayers(c) {
		return
	}
	v.Transaction.Invoice.Account = mask(v.Transaction.Invoice.Account)
}

// refundReply answers the engine's refund reply (a refund.View) with the payer
// hidden as hideRefundPayer says; refusals pass through as walletReply's.
func (s *Server) refundReply(c echo.Context, r topics.Reply, status int) error {
	if r.Error != nil || seesPayers(c) {
		return s.walletReply(c, r, status)
	}
	var v refund.View
	if err := json.Unmarshal(r.Result, &v); err != nil {
		return fmt.Errorf("refund reply: %w", err)
	}
	hideRefundPayer(c, &v)
	return c.JSON(status, v)
}
