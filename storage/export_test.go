package storage

// The checkout lookups' SQL, so a test can EXPLAIN exactly what runs.
var (
	GetCheckoutQuery  = getCheckoutQuery
	CheckoutByIDQuery = checkoutByIDQuery
)

// GaugeReads are the database gauges' counted reads by the partial indexes that
// answer each ("a|b": either; $1 the environment, $2 the backlog's cap).
var GaugeReads = map[string]string{
	"payout_files_awaiting_approval":                  awaitingSQL,
	"webhooks_disabled":                               disabledHooksSQL,
	"webhook_deliveries_due|webhook_deliveries_queue": backlogSQL,
}
