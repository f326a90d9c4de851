package storage_test

import (
	"slices"
	"strings"
	"testing"

	"paysvc/storage"
)

// TestCheckLedgerPages: comparing wallets a page at a time finds what one
// statement finds, whichever page a bad wallet falls in, and says how far it is.
func TestCheckLedgerPages(t *testing.T) {
	t.Parallel()
	b := setupLedger(t)
	b.dropWalletChecks(t)
	b.exec(t, `UPDATE wallets SET current_balance = 150, available_balance = 150 WHERE wallet_id = 'W1'`)
	b.exec(t, `UPDATE wallets SET current_balance = -1, available_balance = -1 WHERE wallet_id = 'W2'`)
	for _, page := range []int{1, 2, 3, 10_000} {
		var lines []string
		r, err := storage.CheckLedgerPaged(b.ctx, b.db, func(s string) { lines = append(lines, s) }, page)
		if err != nil {
			t.Fatal(err)
		}
		if r.OK || !slices.Equal(r.WalletMismatch, []string{"W1"}) || !slices.Equal(r.NegativeWallets, []string{"W2"}) || r.Wallets != 2 {
			t.Errorf("page %d: report %+v, want W1 mismatched and W2 negative", page, r)
		}
		if !slices.ContainsFunc(lines, func(s string) bool {
			return strings.HasPrefix(s, "wallets compared: 2 of 2, 1 mismatches, 1 negative, in ")
		}) {
			t.Errorf("page %d: progress %q", page, lines)
		}
	}
}
