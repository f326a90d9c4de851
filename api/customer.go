package api

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"paysvc/api/edge"
	"paysvc/storage"
	"paysvc/topics"
)

var (
	// hostPattern is the spec's pattern of an invoice's host.
	hostPattern = regexp.MustCompile(`^[a-zA-Z0-9\-_./=:?# ]+$`)
	// commentPattern is the spec's pattern of a Payment session's customer_comment.
	commentPattern = regexp.MustCompile(`^[a-zA-Z0-9\-_ ]+$`)
)

// customerFields are the payer details a collection, an STK push, a card payment
// or a checkout session takes, with the spec's limits (Payment customer; billing
// address 140; city and state have no stated limit and get 100).
var customerFields = []struct {
	name    string
	max     int
	pattern *regexp.Regexp
	set     func(*topics.PaymentCustomer, string)
}{
	{"first_name", 45, namePattern, func(c *topics.PaymentCustomer, v string) { c.FirstName = v }},
	{"last_name", 45, namePattern, func(c *topics.PaymentCustomer, v string) { c.LastName = v }},
	{"country", 2, countryPattern, func(c *topics.PaymentCustomer, v string) { c.Country = strings.ToUpper(v) }},
	{"zipcode", 10, namePattern, func(c *topics.PaymentCustomer, v string) { c.Zipcode = v }},
	{"address", 140, nil, func(c *topics.PaymentCustomer, v string) { c.Address = v }},
	{"city", 100, nil, func(c *topics.PaymentCustomer, v string) { c.City = v }},
	{"state", 100, nil, func(c *topics.PaymentCustomer, v string) { c.State = v }},
}

// readCustomer reads the payer's details. comment is the body field that carries
// the customer's comment ("comment" on a checkout; "" where none is taken).
func readCustomer(b edge.Body, comment string) (topics.PaymentCustomer, error) {
	var c topics.PaymentCustomer
	for _, f := range customerFields {
		v, err := b.Str(f.name, false, f.max, f.pattern)
		if err != nil {
			return c, err
		}
		f.set(&c, v)
	}
	if comment != "" {
		v, err := b.Str(comment, false, 255, commentPattern)
		if err != nil {
			return c, err
		}
		c.Comment = v
	}
	return c, nil
}

// readFullName reads the Python SDK's single `name` (its STK push sends one) into
// first and last name where the request gives neither: the first word is the
// first name, the rest the last name, each held to the names' limits.
func readFullName(b edge.Body, c *topics.PaymentCustomer) error {
	name, err := b.Str("name", false, 91, namePattern)
	if err != nil || name == "" || c.FirstName != "" || c.LastName != "" {
		return err
	}
	parts := strings.Fields(name)
	if len(parts) == 0 {
		return nil
	}
	first, last := parts[0], strings.Join(parts[1:], " ")
	if len(first) > 45 || len(last) > 45 {
		return edge.Invalid("name", "Each part of the name must have no more than 45 characters.")
	}
	c.FirstName, c.LastName = first, last
	return nil
}

// readHost reads the invoice's origin host (the spec's pattern, at most 200).
func readHost(b edge.Body) (string, error) {
	return b.Str("host", false, 200, hostPattern)
}

// withSession fills the payer details the request left out from the checkout
// session's: the merchant described its customer when creating the session, the
// payer on the page may type their own.
func withSession(c topics.PaymentCustomer, co *storage.Checkout) topics.PaymentCustomer {
	if co == nil {
		return c
	}
	fill := func(dst *string, src *string) {
		if *dst == "" && src != nil {
			*dst = *src
		}
	}
	fill(&c.FirstName, co.FirstName)
	fill(&c.LastName, co.LastName)
	fill(&c.Country, co.Country)
	fill(&c.Zipcode, co.Zipcode)
	fill(&c.Address, co.Address)
	fill(&c.City, co.City)
	fill(&c.State, co.State)
	fill(&c.Comment, co.Comment)
	return c
}

// readRedirectURL reads an absolute http(s) URL of at most 400 characters: the
// hosted page will send the payer's browser there, so no other scheme
// (javascript:, data:) may get in.
func readRedirectURL(b edge.Body, field string) (string, error) {
	v, err := b.Str(field, false, 400, nil)
	if err != nil || v == "" {
		return v, err
	}
	u, perr := url.Parse(v)
	if perr != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		strings.ContainsAny(v, " \t\r\n") {
		return "", edge.Invalid(field, field+" must be an absolute http or https URL.")
	}
	return v, nil
}

// walletNotFound is the answer for a wallet_id that names none of the merchant's
// wallets (another merchant's included), as the engine gives it for an STK push.
func walletNotFound() *edge.Error {
	return &edge.Error{Status: http.StatusNotFound, Type: "client_error", Code: "not_found", Detail: "Wallet not found.", Attr: "wallet_id"}
}
