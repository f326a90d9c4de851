package storage

// The checkout lookups' SQL, so a test can EXPLAIN exactly what runs.
var (
	GetCheckoutQuery  = getCheckoutQuery
	CheckoutByIDQuery = checkoutByIDQuery
)
