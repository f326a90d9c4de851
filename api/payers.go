package api

import (
	"errors"
	"strings"

	"github.com/labstack/echo/v4"

	"paysvc/api/edge"
	"paysvc/storage"
	"paysvc/topics"
)

// linkPayer makes the payer of a collection that carries an email the merchant's
// customer with that email (one record per merchant and email, shared with the
// customers and subscription customers APIs) and returns the record's id, which
// the payment session shows as customer.customer_id.
//
// Only a secret key updates a record that exists. A public key is public and a
// checkout signature is held by whoever has the page's link: either may add a
// customer, but letting them rewrite the name or phone of any email the merchant
// knows would let anyone deface the merchant's customer book.
//
// A payer's details go in only where they meet the customer record's own rules
// (an ISO country, US/CA/GB with a zipcode): a payment is never refused because of
// the customer book.
func (s *Server) linkPayer(c echo.Context, cmd topics.InvoiceSTKPush) (string, error) {
	p := edge.PrincipalOf(c)
	ctx := c.Request().Context()
	fields := map[string]*string{}
	set := func(col, v string) {
		if v != "" {
			fields[col] = &v
		}
	}
	set("first_name", cmd.Customer.FirstName)
	set("last_name", cmd.Customer.LastName)
	if cmd.Phone != "" {
		set("phone_number", "+"+cmd.Phone)
	}
	if cc := strings.ToUpper(cmd.Customer.Country); iso3166[cc] {
		zipNeeded := cc == "US" || cc == "CA" || cc == "GB"
		if !zipNeeded || cmd.Customer.Zipcode != "" {
			set("country", cc)
			set("zipcode", cmd.Customer.Zipcode)
		}
	}
	u := storage.CustomerUpsert{MerchantID: p.MerchantID, Email: cmd.Email, Fields: fields}
	write := storage.UpsertCustomer
	if p.Kind != "secret" {
		// One statement that never updates: a check-then-upsert would let a public
		// caller overwrite a record created between its check and its write.
		write = storage.CreateCustomerIfAbsent
	}
	var rec storage.Customer
	err := s.redraw(c, "", func(id string) error {
		u.NewID = id
		var err error
		rec, _, err = write(ctx, s.db, u)
		return err
	})
	if errors.Is(err, storage.ErrZipcodeRequired) {
		// The stored record is in US, CA or GB with no zipcode of its own and this
		// payer clears nothing: link it as it is.
		rec, err = storage.CustomerByEmail(ctx, s.db, p.MerchantID, cmd.Email)
	}
	if err != nil {
		return "", err
	}
	return rec.CustomerID, nil
}
