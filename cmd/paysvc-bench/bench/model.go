package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/lib/pq"

	"paysvc/actors/values/money"
	"paysvc/storage"
)

// resolveUnknown settles transfers whose outcome the bench did not learn (no
// answer, or a 5xx). With Idempotency-Keys the same request is sent again: the
// service answers with what the first one did, or applies it now, never twice.
// Without keys nothing can be resolved and the model check reports them.
func (r *runner) resolveUnknown(ctx context.Context) (resolved int) {
	if !r.o.IdempotencyKeys {
		return 0
	}
	var still []transferReq
	for _, t := range r.unknown {
		done := false
		// A key whose first request is still held (409) frees within the
		// service's idempotency lock (30 s); keep asking a little longer than that.
		for attempt := 0; attempt < 40 && !done && ctx.Err() == nil; attempt++ {
			path := "/api/v1/wallets/" + r.wallets[t.Src].ID + "/intra_transfer/"
			status, _, err := r.post(ctx, t.M, path, transferBody(r.wallets[t.Dst].ID, t.Cents), t.IdemKey)
			switch {
			case err == nil && status == http.StatusOK:
				r.delta[t.Src] -= t.Cents
				r.delta[t.Dst] += t.Cents
				done = true
			case err == nil && status < 500 && status != http.StatusConflict:
				done = true
			default:
				time.Sleep(time.Second)
			}
		}
		if done {
			resolved++
		} else {
			still = append(still, t)
		}
	}
	r.unknown = still
	return resolved
}

// modelReport compares the database with what the bench knows it did.
type modelReport struct {
	Wallets    int
	Deposited  int64 // cents, all bench wallets
	Balances   int64 // cents, sum of their current_balance
	Mismatches []string
	Unknown    int // outcomes never learned: the per-wallet check cannot be exact
	OK         bool
}

// checkModel verifies that the bench wallets together still hold exactly what was
// deposited (transfers only move money between them), and that each holds its
// deposit plus what the bench's successful transfers moved in minus out.
func (r *runner) checkModel(ctx context.Context) (modelReport, error) {
	rep := modelReport{Wallets: len(r.wallets), Unknown: len(r.unknown)}
	ids := make(pq.StringArray, len(r.wallets))
	for i, w := range r.wallets {
		ids[i] = w.ID
		rep.Deposited += w.Deposited
	}
	rows, err := r.db.QueryContext(ctx, `SELECT wallet_id, current_balance FROM wallets WHERE wallet_id = ANY($1)`, ids)
	if err != nil {
		return rep, fmt.Errorf("model check: %w", err)
	}
	defer rows.Close()
	got := map[string]int64{}
	for rows.Next() {
		var id string
		var bal money.Amount
		if err := rows.Scan(&id, &bal); err != nil {
			return rep, err
		}
		c, err := bal.Cents()
		if err != nil {
			return rep, fmt.Errorf("wallet %s balance %s: %w", id, bal, err)
		}
		got[id] = c
		rep.Balances += c
	}
	if err := rows.Err(); err != nil {
		return rep, err
	}
	for i, w := range r.wallets {
		have, ok := got[w.ID]
		want := w.Deposited + r.delta[i]
		switch {
		case !ok:
			rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("%s: missing from the database", w.ID))
		case have != want:
			rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("%s: balance %s, expected %s (deposit %s %+d cents by transfers)",
				w.ID, centsString(have), centsString(want), centsString(w.Deposited), r.delta[i]))
		}
	}
	rep.OK = rep.Balances == rep.Deposited && len(rep.Mismatches) == 0 && rep.Unknown == 0
	return rep, nil
}

func (r *runner) checkLedger(ctx context.Context) (storage.LedgerReport, error) {
	return storage.CheckLedger(ctx, r.db)
}
