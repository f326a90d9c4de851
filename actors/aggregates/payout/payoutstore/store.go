package payoutstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/actors/aggregates/payout"
	"paysvc/storage"
)

// Writes collects the payment files a batch changed: for each, the version
// its header had when the batch first touched it (0: new, inserted), its last
// state, and which of its transactions changed (only those are written: a rail
// result for 500 of a file's 10,000 transactions writes 500 rows). It is the
// payment files' storage.AggregateRows.
type Writes struct {
	files map[string]*payoutAcc
	order []string
}

type payoutAcc struct {
	prev    int64
	state   payout.State
	changed map[int]bool
}

// NewWrites returns an empty collector.
func NewWrites() *Writes { return &Writes{files: map[string]*payoutAcc{}} }

// Touch records a file's new state and the positions of the transactions that
// changed. Rows reads the state when the batch commits, after the engine moved on:
// after must not be changed in place later (the payout aggregate's apply functions return new
// states, cloning the transactions they change).
func (w *Writes) Touch(before, after payout.State, changed []int) {
	a, ok := w.files[after.FileID]
	if !ok {
		a = &payoutAcc{prev: before.Version, changed: map[int]bool{}}
		w.files[after.FileID] = a
		w.order = append(w.order, after.FileID)
	}
	a.state = after
	for _, i := range changed {
		a.changed[i] = true
	}
}

// Kind implements storage.AggregateRows.
func (w *Writes) Kind() string { return storage.PayoutKind }

// Rows implements storage.AggregateRows: {"files": [...], "txns": [...]} for
// paysvc_apply_payout, files in the order the batch first touched them and each
// file's changed transactions in file order.
func (w *Writes) Rows() (json.RawMessage, error) {
	if len(w.order) == 0 {
		return nil, nil
	}
	fr := make([]fileRow, 0, len(w.order))
	tr := []txnRow{}
	for _, id := range w.order {
		a := w.files[id]
		h := a.state.Header
		r, err := rowOf(h.FileID, h.MerchantID, h.Status, h, h.CreatedAt, h.UpdatedAt)
		if err != nil {
			return nil, err
		}
		fr = append(fr, fileRow{row: r, TrackingID: h.TrackingID, Version: h.Version, Prev: a.prev})
		for seq, t := range a.state.Txns {
			if !a.changed[seq] {
				continue
			}
			r, err := rowOf(h.FileID, h.MerchantID, t.Status, t, t.CreatedAt, t.UpdatedAt)
			if err != nil {
				return nil, err
			}
			tr = append(tr, txnRow{row: r, TransactionID: t.TransactionID, Seq: seq, Provider: h.Provider,
				Account: t.Account, IdempotencyKey: t.IdempotencyKey, ClaimsKey: ClaimsKey(h, t)})
		}
	}
	return json.Marshal(struct {
		Files []fileRow `json:"files"`
		Txns  []txnRow  `json:"txns"`
	}{fr, tr})
}

// row is the columns a file's row and its transactions' rows share: the file and
// merchant they belong to, their status, the JSON they store and their times.
type row struct {
	FileID     string          `json:"file_id"`
	MerchantID string          `json:"merchant_id"`
	Status     string          `json:"status"`
	Data       json.RawMessage `json:"data"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

// rowOf is the shared columns of a row storing v (a header or a transaction).
func rowOf(fileID, merchantID, status string, v any, created, updated time.Time) (row, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return row{}, fmt.Errorf("payment file %s: %T: %w", fileID, v, err)
	}
	return row{FileID: fileID, MerchantID: merchantID, Status: status, Data: data, CreatedAt: created, UpdatedAt: updated}, nil
}

type fileRow struct {
	row
	TrackingID string `json:"tracking_id"`
	Version    int64  `json:"version"`
	Prev       int64  `json:"prev"`
}

type txnRow struct {
	row
	TransactionID  string `json:"transaction_id"`
	Seq            int    `json:"seq"`
	Provider       string `json:"provider"`
	Account        string `json:"account"`
	IdempotencyKey string `json:"idempotency_key"`
	ClaimsKey      bool   `json:"claims_key"`
}

// ClaimsKey reports whether a transaction holds its idempotency key: its file was
// approved and it did not fail, so no other transaction with the key is paid.
func ClaimsKey(h payout.Header, t payout.Txn) bool {
	return t.IdempotencyKey != "" && t.Status != payout.TxnFailed &&
		(h.Status == payout.StatusProcessing || h.Status == payout.StatusComplete)
}

// Load reads whole files (header and transactions in file order) of one
// merchant, for the engine to hydrate actors.
func Load(ctx context.Context, q sqlx.QueryerContext, merchantID string, fileIDs []string) (map[string]payout.State, error) {
	var heads [][]byte
	if err := sqlx.SelectContext(ctx, q, &heads, `SELECT data FROM payout_files WHERE merchant_id = $1 AND file_id = ANY($2)`,
		merchantID, pq.StringArray(fileIDs)); err != nil {
		return nil, fmt.Errorf("load payment files: %w", err)
	}
	out := make(map[string]payout.State, len(heads))
	found := make([]string, 0, len(heads))
	for _, d := range heads {
		var h payout.Header
		if err := json.Unmarshal(d, &h); err != nil {
			return nil, fmt.Errorf("decode payment file: %w", err)
		}
		out[h.FileID] = payout.State{Header: h, Txns: make([]payout.Txn, 0, h.Count)}
		found = append(found, h.FileID)
	}
	if len(found) == 0 {
		return out, nil
	}
	rows, err := q.QueryxContext(ctx, `SELECT file_id, data FROM payout_transactions
		WHERE file_id = ANY($1) AND merchant_id = $2 ORDER BY file_id, seq`, pq.StringArray(found), merchantID)
	if err != nil {
		return nil, fmt.Errorf("load payment transactions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var fileID string
		var data []byte
		if err := rows.Scan(&fileID, &data); err != nil {
			return nil, err
		}
		var t payout.Txn
		if err := json.Unmarshal(data, &t); err != nil {
			return nil, fmt.Errorf("decode payment transaction: %w", err)
		}
		s := out[fileID]
		s.Txns = append(s.Txns, t)
		out[fileID] = s
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for id, s := range out {
		if len(s.Txns) != s.Count {
			return nil, fmt.Errorf("payment file %s: %d of %d transactions stored", id, len(s.Txns), s.Count)
		}
	}
	return out, nil
}

// Get reads one of the merchant's whole files.
func Get(ctx context.Context, q sqlx.QueryerContext, merchantID, fileID string) (payout.State, error) {
	m, err := Load(ctx, q, merchantID, []string{fileID})
	if err != nil {
		return payout.State{}, err
	}
	s, ok := m[fileID]
	if !ok {
		return s, storage.ErrNotFound
	}
	return s, nil
}
