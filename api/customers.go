package api

import (
	"errors"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/invoice/invoicestore"
	"paysvc/api/edge"
	"paysvc/storage"
)

// Limits of a customer (the spec's Limits table where it has one; the others are
// ours, docs/api-decisions.md "Subscriptions: plans and customers").
const (
	emailMax        = 254
	customerNameMax = 45
	phoneMax        = 20
	referenceMax    = 45
	addressMax      = 50
	cityMax         = 100
	stateMax        = 100
	zipcodeMax      = 10
)

var (
	// intlPhonePattern is a number in international format: an optional "+", a
	// country code (never 0) and the number, with single spaces or hyphens between
	// groups allowed; 7 to 15 digits (E.164) are checked apart.
	intlPhonePattern = regexp.MustCompile(`^\+?[1-9][0-9]*(?:[ -][0-9]+)*$`)
	zipcodePattern   = regexp.MustCompile(`^[a-zA-Z0-9\- ]+$`)
)

// iso3166 is every officially assigned ISO 3166-1 alpha-2 code, and XK (Kosovo,
// user-assigned but used by card networks and banks).
var iso3166 = func() map[string]bool {
	const codes = `AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW
		BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO
		FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO
		JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR MS
		MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO RS RU
		RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA
		UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW XK`
	m := map[string]bool{}
	for _, c := range strings.Fields(codes) {
		m[c] = true
	}
	return m
}()

// customerRecordJSON is the Subscription customer of the interface, which is also
// what /customers/ answers (one record). Unset fields are null.
type customerRecordJSON struct {
	CustomerID  string    `json:"customer_id"`
	Email       string    `json:"email"`
	FirstName   *string   `json:"first_name"`
	LastName    *string   `json:"last_name"`
	PhoneNumber *string   `json:"phone_number"`
	Reference   *string   `json:"reference"`
	Address     *string   `json:"address"`
	City        *string   `json:"city"`
	State       *string   `json:"state"`
	Zipcode     *string   `json:"zipcode"`
	Country     *string   `json:"country"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func renderCustomer(c storage.Customer) customerRecordJSON {
	return customerRecordJSON{CustomerID: c.CustomerID, Email: c.Email, FirstName: c.FirstName, LastName: c.LastName,
		PhoneNumber: c.PhoneNumber, Reference: c.Reference, Address: c.Address, City: c.City, State: c.State,
		Zipcode: c.Zipcode, Country: c.Country, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
}

// readCustomerUpsert reads a customer upsert. email is the key and always required;
// first_name and last_name are required when requireNames (the subscriptions form)
// and may be left out otherwise (the /customers/ form: a payer may be known by
// email alone), but are never blanked. Every other field: absent or null keeps the
// stored value, "" clears it, anything else replaces it.
func readCustomerUpsert(c echo.Context, b edge.Body, requireNames bool) (storage.CustomerUpsert, error) {
	u := storage.CustomerUpsert{MerchantID: edge.PrincipalOf(c).MerchantID, Fields: map[string]*string{}}
	email, err := b.Str("email", true, emailMax, nil)
	if err != nil {
		return u, err
	}
	if !emailPattern.MatchString(email) {
		return u, edge.Invalid("email", "Enter a valid email address.")
	}
	u.Email = email
	for _, f := range []string{"first_name", "last_name"} {
		if !requireNames && !b.Has(f) {
			continue
		}
		v, err := b.Str(f, true, customerNameMax, namePattern)
		if err != nil {
			return u, err
		}
		u.Fields[f] = &v
	}
	fields := []struct {
		name    string
		max     int
		pattern *regexp.Regexp
	}{
		{"phone_number", phoneMax, intlPhonePattern}, {"reference", referenceMax, nil}, {"address", addressMax, nil},
		{"city", cityMax, nil}, {"state", stateMax, nil}, {"zipcode", zipcodeMax, zipcodePattern}, {"country", 2, nil},
	}
	for _, f := range fields {
		if !b.Has(f.name) {
			continue
		}
		v, err := b.Str(f.name, false, f.max, f.pattern)
		if err != nil {
			return u, err
		}
		u.Fields[f.name] = optional(v)
	}
	if p := u.Fields["phone_number"]; p != nil {
		digits := 0
		for _, r := range *p {
			if r >= '0' && r <= '9' {
				digits++
			}
		}
		if digits < 7 || digits > 15 {
			return u, edge.Invalid("phone_number", "Enter the phone number in international format, e.g. +254712345678 (7 to 15 digits).")
		}
	}
	if cc := u.Fields["country"]; cc != nil {
		up := strings.ToUpper(*cc)
		if !iso3166[up] {
			return u, edge.Invalid("country", "country must be an ISO 3166-1 alpha-2 code, e.g. KE, US, GB.")
		}
		u.Fields["country"] = &up
	}
	return u, nil
}

// errZipcodeRequired answers the database's zipcode rule (customers_zipcode_required),
// which holds for the stored record: a body that leaves zipcode out relies on the
// stored one.
var errZipcodeRequired = edge.Invalid("zipcode", "zipcode is required when country is US, CA or GB.")

func (s *Server) saveCustomer(c echo.Context, requireNames bool) error {
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	u, err := readCustomerUpsert(c, b, requireNames)
	if err != nil {
		return err
	}
	var saved storage.Customer
	var created bool
	err = s.redraw(c, "", func(id string) error {
		u.NewID = id
		var err error
		saved, created, err = storage.UpsertCustomer(c.Request().Context(), s.db, u)
		return err
	})
	if errors.Is(err, storage.ErrZipcodeRequired) {
		return errZipcodeRequired
	}
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	out := renderCustomer(saved)
	// The form of each route reads its records with its own permission: a key
	// that may write customers but not read them must not read, through an upsert
	// naming an email, what the record already held.
	read := edge.PermViewCollections
	if requireNames {
		read = edge.PermViewSubscriptions
	}
	if p := edge.PrincipalOf(c); !p.Can(read) {
		hideStoredCustomer(&out, u.Fields)
	}
	return c.JSON(status, out)
}

// upsertSubscriptionCustomer is POST /subscriptions/customers/ (names required).
func (s *Server) upsertSubscriptionCustomer(c echo.Context) error { return s.saveCustomer(c, true) }

// upsertCustomer is POST /customers/, the Python SDK's form: the same record and
// rules, names optional.
func (s *Server) upsertCustomer(c echo.Context) error { return s.saveCustomer(c, false) }

func (s *Server) listCustomers(c echo.Context) error {
	return listOwn(s, c, storage.ListCustomers, renderCustomer)
}

func (s *Server) pathCustomer(c echo.Context) (storage.Customer, error) {
	cu, err := storage.GetCustomer(c.Request().Context(), s.db, edge.PrincipalOf(c).MerchantID, c.Param("customer_id"))
	if errors.Is(err, storage.ErrNotFound) {
		return cu, edge.NotFound("Customer not found.")
	}
	return cu, err
}

func (s *Server) getCustomer(c echo.Context) error {
	cu, err := s.pathCustomer(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, renderCustomer(cu))
}

// customerTransactions lists the customer's payments, newest first: the merchant's
// invoices paid with the customer's email (any case) and the customer's subscription
// cycle charges, each as the Payment session the collection endpoints answer.
func (s *Server) customerTransactions(c echo.Context) error {
	cu, err := s.pathCustomer(c)
	if err != nil {
		return err
	}
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	rows, total, err := invoicestore.ByCustomer(c.Request().Context(), s.db, cu.MerchantID, cu.CustomerID, cu.Email, pg.size, pg.offset())
	if err != nil {
		return err
	}
	out := make([]sessionJSON, len(rows))
	for i, inv := range rows {
		out[i] = renderSession(inv)
	}
	return c.JSON(http.StatusOK, pg.list(c, total, out))
}
