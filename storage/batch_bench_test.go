package storage_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"paysvc/actors/values/ledger"
	"paysvc/storage"
)

// walletJSONRows sends wallet snapshots as an aggregate's jsonb rows instead of the
// core's typed arrays: the design measured against in docs/adr/0003.
type walletJSONRows []storage.WalletWrite

func (walletJSONRows) Kind() string { return "walletjson" }

func (ws walletJSONRows) Rows() (json.RawMessage, error) {
	type row struct {
		WalletID  string    `json:"wallet_id"`
		Current   string    `json:"current_balance"`
		Available string    `json:"available_balance"`
		Label     string    `json:"label"`
		Disburse  bool      `json:"can_disburse"`
		Version   int64     `json:"version"`
		Prev      int64     `json:"prev"`
		UpdatedAt time.Time `json:"updated_at"`
	}
	rows := make([]row, len(ws))
	for i, w := range ws {
		s := w.Row
		rows[i] = row{s.WalletID, s.CurrentBalance.String(), s.AvailableBalance.String(), s.Label, s.CanDisburse, s.Version, w.PrevVersion, s.UpdatedAt}
	}
	return json.Marshal(rows)
}

const walletJSONFunction = `
CREATE FUNCTION paysvc_apply_walletjson(p_rows jsonb, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE r record; n bigint;
BEGIN
	FOR r IN SELECT * FROM jsonb_to_recordset(p_rows) AS x(wallet_id text, current_balance numeric, available_balance numeric,
	             label text, can_disburse boolean, version bigint, prev bigint, updated_at timestamptz) LOOP
		UPDATE wallets SET current_balance = r.current_balance, available_balance = r.available_balance, version = r.version,
		       updated_at = r.updated_at, label = r.label, can_disburse = r.can_disburse
		 WHERE wallet_id = r.wallet_id AND version = r.prev;
		GET DIAGNOSTICS n = ROW_COUNT;
		IF n <> 1 THEN RAISE EXCEPTION 'stale wallet snapshot: %', r.wallet_id USING ERRCODE = 'PS002'; END IF;
	END LOOP;
END $$;
INSERT INTO batch_aggregates (kind, description) VALUES ('walletjson', 'benchmark: wallets as jsonb');`

// BenchmarkCommitBatchTransfers commits batches of 16 transfers between 32 wallets
// (32 wallet updates, 32 ledger entries, 16 processed commands): the hot path.
// "typed" sends the wallets as the core's arrays, "jsonb" as an aggregate's rows
// through paysvc_apply_<kind>. Run with -benchtime and -count to compare:
//
//	go test ./storage -run '^$' -bench CommitBatchTransfers -count 6
func BenchmarkCommitBatchTransfers(b *testing.B) {
	for _, mode := range []string{"typed", "jsonb"} {
		b.Run(mode, func(b *testing.B) {
			bb := setupBatch(b)
			if _, err := bb.db.ExecContext(bb.ctx, walletJSONFunction); err != nil {
				b.Fatal(err)
			}
			const wallets, transfers = 32, 16
			ws := make([]storage.WalletWrite, wallets)
			for i := range ws {
				ws[i] = storage.WalletWrite{Row: state(fmt.Sprintf("W%d", i), "M1", "1000000.00", 1, t0)}
			}
			next := int64(1)
			if err := storage.CommitBatch(bb.ctx, bb.db, storage.Batch{Topic: testTopic, Epoch: bb.epoch, NextOffset: next, At: t0, Wallets: ws}); err != nil {
				b.Fatal(err)
			}
			one := amt("1.00")
			b.ResetTimer()
			for range b.N {
				bt := storage.Batch{Topic: testTopic, Epoch: bb.epoch, At: t0}
				updated := make([]storage.WalletWrite, wallets)
				for i := range ws {
					prev := ws[i].Row.Version
					s := ws[i].Row
					s.Version++
					s.UpdatedAt = t0.Add(time.Duration(next) * time.Millisecond)
					updated[i] = storage.WalletWrite{Row: s, PrevVersion: prev}
				}
				for t := range transfers {
					from, to := updated[2*t].Row, updated[2*t+1].Row
					cmd := fmt.Sprintf("C%d", next)
					bt.Processed = append(bt.Processed, storage.Processed{CommandID: cmd, MerchantID: "M1", Type: "wallet.transfer", Offset: next, Reply: []byte(`{}`)})
					bt.Entries = append(bt.Entries,
						storage.EntryWrite{CommandID: cmd, Entry: ledger.Entry{TransactionID: cmd, Account: ledger.WalletAccount(from.WalletID), WalletID: from.WalletID,
							MerchantID: "M1", Currency: "KES", Amount: one.Neg(), RunningBalance: &from.CurrentBalance, TransType: "TRANSFER"}},
						storage.EntryWrite{CommandID: cmd, Entry: ledger.Entry{TransactionID: cmd, Account: ledger.WalletAccount(to.WalletID), WalletID: to.WalletID,
							MerchantID: "M1", Currency: "KES", Amount: one, RunningBalance: &to.CurrentBalance, TransType: "TRANSFER"}})
					next++
				}
				bt.NextOffset = next
				if mode == "typed" {
					bt.Wallets = updated
				} else {
					bt.Aggregates = []storage.AggregateRows{walletJSONRows(updated)}
				}
				if err := storage.CommitBatch(bb.ctx, bb.db, bt); err != nil {
					b.Fatal(err)
				}
				ws = updated
			}
		})
	}
}
