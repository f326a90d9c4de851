package edge

// The permissions a restricted secret key can hold (`paysvc key create --permissions`).
// The merchant's main secret key holds no list and may do everything. The spec names
// the three file permissions; the others cover every other route, read apart from
// write, so a key given to a reporting job cannot move money or redirect webhooks.
const (
	PermViewWallets         = "view_wallets"
	PermAddWallets          = "add_wallets"
	PermAddTransfers        = "add_transfers"
	PermViewCollections     = "view_collections"
	PermAddCollections      = "add_collections"
	PermViewFiles           = "view_files"
	PermAddFiles            = "add_files"
	PermChangeFiles         = "change_files"
	PermApproveFiles        = "approve_files"
	PermViewWebhooks        = "view_webhooks"
	PermChangeWebhooks      = "change_webhooks"
	PermViewRefunds         = "view_refunds"
	PermAddRefunds          = "add_refunds"
	PermViewSubscriptions   = "view_subscriptions"
	PermChangeSubscriptions = "change_subscriptions"
)

// Permissions is every permission with what it grants, in the order docs list them.
// `paysvc key create` and the console refuse any other name.
var Permissions = []struct{ Name, Grants string }{
	{PermViewWallets, "list and read wallets and their transactions"},
	{PermAddWallets, "create wallets"},
	{PermAddTransfers, "move money between the merchant's own wallets (intra_transfer)"},
	{PermViewCollections, "read collection status, pay requests, customers and their payments, payment links; see payers' personal data in full"},
	{PermAddCollections, "start collections with the secret key: STK push, collection, card, pay requests; create and update customers (/customers/); create and change payment links"},
	{PermViewFiles, "read payment files and frequently used beneficiaries"},
	{PermAddFiles, "create payment files (awaiting approval) and validate recipient accounts"},
	{PermChangeFiles, "cancel payment files"},
	{PermApproveFiles, "approve payment files, including initiation with requires_approval NO"},
	{PermViewWebhooks, "list webhooks and their deliveries (the deliveries carry event payloads)"},
	{PermChangeWebhooks, "create, change, delete webhooks, rotate their secrets, replay events"},
	{PermViewRefunds, "list and read refunds (chargebacks)"},
	{PermAddRefunds, "request refunds of collected invoices and cancel them (holds and moves money)"},
	{PermViewSubscriptions, "list and read subscription plans and subscription customers"},
	{PermChangeSubscriptions, "create and update subscription plans and subscription customers"},
}

// KnownPermission reports whether name is a permission of the catalogue.
func KnownPermission(name string) bool {
	for _, p := range Permissions {
		if p.Name == name {
			return true
		}
	}
	return false
}
