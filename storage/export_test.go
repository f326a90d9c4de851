package storage

// The checkout lookups' SQL, so a test can EXPLAIN exactly what runs.
var (
	GetCheckoutQuery  = getCheckoutQuery
	CheckoutByIDQuery = checkoutByIDQuery
)

// A customer's payments, for the same reason.
var CustomerInvoicesQuery = customerInvoicesQuery
