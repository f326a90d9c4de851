// Package subscriptionstore reads the subscription aggregate's stored state
// (subscriptions, written by paysvc_apply_subscription in the batch commit, and
// the cycles' invoice records in subscription_invoices) back into
// subscription.State and invoice.State: for the engine's hydration
// (subscriptionkind) and the API's reads.
//
// It is the subscriptions' own row mapping, so that storage, which owns the schema
// and the commit, names no aggregate (docs/adr/0007). Every read a merchant makes
// is scoped by the merchant's id; BySetupToken is scoped by the token instead, the
// capability a setup URL carries.
package subscriptionstore
