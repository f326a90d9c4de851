// Package invoicestore is the invoice aggregate's row mapping: Touch lays an
// invoice's state out as its row of the batch commit (storage.InvoiceWrites,
// the core's column arrays), and the reads decode the invoices table's data back
// into invoice.State, for the engine's hydration (invoicekind), the API and the
// rails' callbacks.
//
// It belongs to the aggregate, so that storage, which owns the schema and the
// commit, names no aggregate (docs/adr/0007). Every read a merchant makes is
// scoped by the merchant's id; ForCallback, by the invoice id a rail's callback
// URL names, is for the rails alone.
package invoicestore
