package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// Customer is one record per merchant and email (matched case-insensitively):
// the subscription customer, the /customers/ resource and, later, the payer of
// collections are the same record (migration 0025).
type Customer struct {
	CustomerID  string    `db:"customer_id"`
	MerchantID  string    `db:"merchant_id"`
	Email       string    `db:"email"`
	FirstName   *string   `db:"first_name"`
	LastName    *string   `db:"last_name"`
	PhoneNumber *string   `db:"phone_number"`
	Reference   *string   `db:"reference"`
	Address     *string   `db:"address"`
	City        *string   `db:"city"`
	State       *string   `db:"state"`
	Zipcode     *string   `db:"zipcode"`
	Country     *string   `db:"country"`
	Version     int64     `db:"version"`
	CreatedAt   time.Time `db:"created_at"`
	UpdatedAt   time.Time `db:"updated_at"`
}

const customerColumns = `customer_id, merchant_id, email, first_name, last_name, phone_number, reference, address,
	city, state, zipcode, country, version, created_at, updated_at`

// CustomerFields are the columns of a customer an upsert may write, besides email.
var CustomerFields = []string{"first_name", "last_name", "phone_number", "reference", "address", "city", "state",
	"zipcode", "country"}

// ErrZipcodeRequired: the record would have country US, CA or GB and no zipcode
// (the customers_zipcode_required constraint), so nothing was written.
var ErrZipcodeRequired = errors.New("zipcode is required when country is US, CA or GB")

// CustomerUpsert is a write of the merchant's customer with that email.
type CustomerUpsert struct {
	MerchantID string
	Email      string
	// NewID is the customer_id the record gets if it does not exist yet.
	NewID string
	// Fields are the columns to write, by name (CustomerFields): a nil value clears
	// the column. A column not in Fields keeps its stored value (NULL when new), so
	// a partial write, such as a payer known by email and phone only, never erases
	// what another write recorded.
	Fields map[string]*string
}

// insert is what an INSERT of the write names: the written fields' columns in
// name order (Fields), every inserted column, their placeholders and the
// arguments in the same order. A column outside CustomerFields is an error.
func (u CustomerUpsert) insert() (cols, insertCols, values []string, args []any, err error) {
	cols = make([]string, 0, len(u.Fields))
	for col := range u.Fields {
		if !slices.Contains(CustomerFields, col) {
			return nil, nil, nil, nil, fmt.Errorf("unknown column %q", col)
		}
		cols = append(cols, col)
	}
	slices.Sort(cols)
	args = []any{u.NewID, u.MerchantID, u.Email}
	insertCols = []string{"customer_id", "merchant_id", "email"}
	values = []string{"$1", "$2", "$3"}
	for _, col := range cols {
		args = append(args, u.Fields[col])
		insertCols = append(insertCols, col)
		values = append(values, fmt.Sprintf("$%d", len(args)))
	}
	return cols, insertCols, values, args, nil
}

// UpsertCustomer creates the merchant's customer with that email, or updates the
// one that exists (whatever the case of its stored email, which stays as first
// given) and returns it under its own id. The version and updated_at move only when
// a value changed. Concurrent upserts of one email meet on the unique index
// customers_email and leave exactly one record. ErrZipcodeRequired when the record
// would break the zipcode rule. q may be a transaction (a collection linking its
// payer).
func UpsertCustomer(ctx context.Context, q sqlx.QueryerContext, u CustomerUpsert) (Customer, bool, error) {
	cols, insertCols, values, args, err := u.insert()
	if err != nil {
		return Customer{}, false, fmt.Errorf("upsert customer: %w", err)
	}
	set := []string{}
	for _, col := range cols {
		set = append(set, col+" = EXCLUDED."+col)
	}
	changed := "false"
	if len(cols) > 0 {
		changed = "(c." + strings.Join(cols, ", c.") + ") IS DISTINCT FROM (EXCLUDED." + strings.Join(cols, ", EXCLUDED.") + ")"
	}
	set = append(set, "version = CASE WHEN "+changed+" THEN c.version + 1 ELSE c.version END",
		"updated_at = CASE WHEN "+changed+" THEN now() ELSE c.updated_at END")
	query := `INSERT INTO customers AS c (` + strings.Join(insertCols, ", ") + `, version, created_at, updated_at)
		VALUES (` + strings.Join(values, ", ") + `, 1, now(), now())
		ON CONFLICT (merchant_id, lower(email)) DO UPDATE SET ` + strings.Join(set, ", ") + `
		RETURNING ` + customerColumns + `, (xmax = 0) AS created`
	var row struct {
		Customer
		Created bool `db:"created"`
	}
	err = sqlx.GetContext(ctx, q, &row, query, args...)
	if breaks(err, "customers_zipcode_required") {
		return Customer{}, false, ErrZipcodeRequired
	}
	if err != nil {
		return Customer{}, false, fmt.Errorf("upsert customer: %w", idTaken(err, "customers"))
	}
	return row.Customer, row.Created, nil
}

// CreateCustomerIfAbsent creates the merchant's customer with that email unless
// one exists, and returns the record: the new one (created true), or the existing
// one exactly as stored. It never changes a record: a public caller (the plan
// subscribe page) may add a customer but must not rewrite the names of one the
// merchant already knows. One statement on the unique index customers_email, so a
// concurrent creation of the same email is found, not overwritten.
func CreateCustomerIfAbsent(ctx context.Context, q sqlx.QueryerContext, u CustomerUpsert) (Customer, bool, error) {
	_, insertCols, values, args, err := u.insert()
	if err != nil {
		return Customer{}, false, fmt.Errorf("create customer: %w", err)
	}
	var c Customer
	err = sqlx.GetContext(ctx, q, &c, `INSERT INTO customers (`+strings.Join(insertCols, ", ")+`, version, created_at, updated_at)
		VALUES (`+strings.Join(values, ", ")+`, 1, now(), now())
		ON CONFLICT (merchant_id, lower(email)) DO NOTHING
		RETURNING `+customerColumns, args...)
	if breaks(err, "customers_zipcode_required") {
		return Customer{}, false, ErrZipcodeRequired
	}
	if errors.Is(err, sql.ErrNoRows) {
		// The email is taken (perhaps by a concurrent creation, committed before
		// ON CONFLICT looked): the stored record, untouched.
		c, err = CustomerByEmail(ctx, q, u.MerchantID, u.Email)
		return c, false, err
	}
	if err != nil {
		return Customer{}, false, fmt.Errorf("create customer: %w", idTaken(err, "customers"))
	}
	return c, true, nil
}

// GetCustomer reads one of the merchant's customers; another merchant's is ErrNotFound.
func GetCustomer(ctx context.Context, q sqlx.QueryerContext, merchantID, customerID string) (Customer, error) {
	return getOne[Customer](ctx, q, `SELECT `+customerColumns+` FROM customers WHERE merchant_id = $1 AND customer_id = $2`,
		merchantID, customerID)
}

// CustomerByEmail reads the merchant's customer with that email, whatever its case.
func CustomerByEmail(ctx context.Context, q sqlx.QueryerContext, merchantID, email string) (Customer, error) {
	return getOne[Customer](ctx, q, `SELECT `+customerColumns+` FROM customers WHERE merchant_id = $1 AND lower(email) = lower($2)`,
		merchantID, email)
}

// ListCustomers returns one page of the merchant's customers, newest first, and the total.
func ListCustomers(ctx context.Context, q sqlx.QueryerContext, merchantID string, limit, offset int) ([]Customer, int, error) {
	return offsetPage[Customer](ctx, q, "customers", "customers", customerColumns, "created_at DESC, customer_id DESC",
		merchantID, limit, offset)
}
