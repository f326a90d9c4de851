package api

import (
	"encoding/json"
	"strings"
	"time"

	"paysvc/actors/aggregates/payout"
	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/values/money"
)

// The approve route's body limit. The official SDKs approve a file by posting
// back the whole initiation response (docs/compat.md), so approve must take the answer
// to the largest file the service accepts: MaxFileTransactions transactions, each
// echoing every field the merchant sent plus what the service adds (ids, charge,
// statuses, timestamps). That is far over the 1 MiB of other routes.
//
// The bound is measured, not guessed: approveResponseBytes encodes a file whose
// every field is at the longest the API lets it be (a text field at its limit in
// characters, an amount at its provider maximum, a timestamp with nanoseconds and
// a zone offset), one and two transactions long, and extends the difference to
// MaxFileTransactions. The limit is twice that, rounded up to a MiB: the margin
// is for text that is not ASCII (two or three bytes a character as clients
// re-encode it) and escapes, as the initiation limit (16 times 1 MiB) is about
// twice the largest ASCII file. A field added to the views is counted without
// anyone updating a constant.
var approveBodyLimit = func() int64 {
	n := 2 * approveResponseBytes(MaxFileTransactions)
	const mib = 1 << 20
	return (n + mib - 1) / mib * mib
}()

// approveResponseBytes is the size of the initiation response of a file of n
// transactions whose every field is at its maximum length, as a client posts it
// back (with the SDK's public_key added).
func approveResponseBytes(n int) int64 {
	one, two := worstFileJSON(1), worstFileJSON(2)
	per := int64(two - one)
	extra := len(`,"callback_secret":"pcs_` + strings.Repeat("f", 64) + `","public_key":"` + strings.Repeat("k", 200) + `"`)
	return int64(one) + int64(n-1)*per + int64(extra)
}

// worstFileJSON encodes a file of n transactions with every field at its longest.
func worstFileJSON(n int) int {
	text := func(max int) string { return strings.Repeat("x", max) }
	at := time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -(11*3600+30*60)))
	big := money.MustParse("100000000.00") // RTGS's maximum, the largest of any provider
	txns := make([]payout.Txn, n)
	for i := range txns {
		txns[i] = payout.Txn{TransactionID: text(10), RequestReferenceID: text(36), Account: text(64), Amount: big, Charge: big,
			Name: text(100), IDNumber: text(30), CategoryName: text(60), Narrative: text(100), AccountType: text(20),
			AccountReference: text(40), BankCode: text(10), IdempotencyKey: text(255), Status: payout.TxnProcessing,
			StatusCode: payout.TxnCodeStarted, StatusDescription: text(200), ProviderReference: text(64),
			ProviderAccountName: text(100), CreatedAt: at, UpdatedAt: at}
	}
	total := money.MustParse("1000000000000.00") // 10,000 times the largest amount
	f := payout.State{Header: payout.Header{FileID: text(40), TrackingID: text(36), Nonce: text(64), WalletID: text(40),
		Provider: payout.ProviderPesalink, Currency: "KES", Status: payout.StatusPreview, StatusCode: payout.CodeAwaiting,
		BatchReference: text(70), DeviceID: text(100), CallbackURL: text(400), FailedReason: text(200), TotalAmount: total,
		ChargeEstimate: total, PaidAmount: total, FailedAmount: total, ActualCharges: total, Count: MaxFileTransactions,
		CreatedAt: at, UpdatedAt: at}, Txns: txns}
	w := wallet.View{WalletID: text(40), Label: text(100), CanDisburse: true, Currency: "KES", WalletType: "SETTLEMENT",
		CurrentBalance: total, AvailableBalance: total, CreatedAt: at, UpdatedAt: at}
	raw, err := json.Marshal(f.View(&w, nil))
	if err != nil {
		panic(err) // our own types only
	}
	return len(raw)
}
