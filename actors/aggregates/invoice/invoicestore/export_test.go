package invoicestore

// A customer's payments' SQL, so a test can EXPLAIN exactly what runs.
var ByCustomerQuery = customerInvoicesQuery
