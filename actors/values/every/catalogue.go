package every

import "slices"

// The names of the service's periodic jobs, "<home>.<what>". A name is part of
// the metrics' label values, the dashboard and the alert: keep it stable.
// docs/operations.md ("Periodic jobs") says for each what it does, how often and
// in which role.
const (
	STKQuery              = "rails.stk_query"              // live: ask Daraja about prompts whose callback never came
	STKResend             = "rails.stk_resend"             // sandbox: send again prompts the simulator lost
	CardClearing          = "rails.card_clearing"          // release cleared card collections to the balance
	PayoutResubmit        = "rails.payout_resubmit"        // submit again payouts with no outcome in time
	PayoutStatusQuery     = "rails.payout_status_query"    // live: ask Daraja about B2C payouts with no outcome
	CollectionsProcessing = "rails.collections_processing" // refresh the PROCESSING collections gauges
	RefundSandboxRail     = "refund.sandbox_rail"          // sandbox: the refund rail (take, then settle)
	SubscriptionCycles    = "subscription.cycles"          // issue the charge of every due subscription cycle
	PayRequestReminders   = "api.pay_request_reminders"    // email due pay-request reminders
	RetentionIdempotency  = "retention.idempotency_keys"   // prune expired idempotency keys
	RetentionReplies      = "retention.processed_commands" // empty old processed commands' replies
	RetentionWebhooks     = "retention.webhook_deliveries" // prune old finished webhook deliveries
	LedgerAudit           = "ledger.audit"                 // audit the ledger (one relay instance)
	OutboxBacklog         = "relay.outbox_backlog"         // refresh the outbox backlog gauge
	GCMemoryLimit         = "service.gc_memory_limit"      // move the soft memory limit with the live heap
)

var catalogue = []string{
	STKQuery, STKResend, CardClearing, PayoutResubmit, PayoutStatusQuery, CollectionsProcessing,
	RefundSandboxRail, SubscriptionCycles, PayRequestReminders,
	RetentionIdempotency, RetentionReplies, RetentionWebhooks,
	LedgerAudit, OutboxBacklog, GCMemoryLimit,
}

// Names lists every job of the catalogue, sorted.
func Names() []string {
	out := slices.Clone(catalogue)
	slices.Sort(out)
	return out
}

func known(name string) bool { return slices.Contains(catalogue, name) }
