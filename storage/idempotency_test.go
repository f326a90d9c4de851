package storage_test

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/storage"
	"paysvc/storage/storagetest"
)

const day = 24 * time.Hour

type idemBundle struct {
	ctx context.Context
	db  *sqlx.DB
}

func setupIdem(t *testing.T) idemBundle {
	t.Helper()
	return idemBundle{ctx: context.Background(), db: storagetest.New(t).DB}
}

func (b idemBundle) begin(t *testing.T, merchant, key, hash, cmd string, lock, retain time.Duration) (storage.IdempotencyOutcome, storage.IdempotencyRecord) {
	t.Helper()
	out, rec, err := storage.BeginIdempotent(b.ctx, b.db, merchant, key, []byte(hash), cmd, lock, retain)
	if err != nil {
		t.Fatal(err)
	}
	return out, rec
}

// complete stores M1's response for key, as a handler that answered does.
func (b idemBundle) complete(t *testing.T, key string, status int, body string) {
	t.Helper()
	if err := storage.CompleteIdempotent(b.ctx, b.db, "M1", key, status, []byte(body)); err != nil {
		t.Fatal(err)
	}
}

// release gives M1's key back, as a handler that failed before answering does.
func (b idemBundle) release(t *testing.T, key string) {
	t.Helper()
	if err := storage.ReleaseIdempotent(b.ctx, b.db, "M1", key); err != nil {
		t.Fatal(err)
	}
}

// age moves one of a record's times a minute into the past. Expiry is judged by
// the database clock (now() in SQL), which a test cannot move: moving the record
// instead is what time passing would do, without waiting for it.
func (b idemBundle) age(t *testing.T, key, column string) {
	t.Helper()
	if _, err := b.db.ExecContext(b.ctx, `UPDATE idempotency_keys SET `+column+` = `+column+` - interval '1 minute'
		WHERE merchant_id = 'M1' AND idem_key = $1`, key); err != nil {
		t.Fatal(err)
	}
}

func wantOutcome(t *testing.T, got, want storage.IdempotencyOutcome) {
	t.Helper()
	if got != want {
		t.Fatalf("outcome = %d, want %d", got, want)
	}
}

func TestIdempotency(t *testing.T) {
	t.Parallel()

	t.Run("FirstRequest_Proceeds", func(t *testing.T) {
		t.Parallel()
		b := setupIdem(t)
		out, rec := b.begin(t, "M1", "k", "h1", "cmd-1", time.Minute, day)
		wantOutcome(t, out, storage.IdemProceed)
		if rec.CommandID != "cmd-1" || string(rec.RequestHash) != "h1" || rec.LockedUntil == nil || rec.ResponseStatus != nil {
			t.Fatalf("record %+v", rec)
		}
	})

	t.Run("SameRequestWhileLocked_InFlight", func(t *testing.T) {
		t.Parallel()
		b := setupIdem(t)
		b.begin(t, "M1", "k", "h1", "cmd-1", time.Minute, day)
		out, rec := b.begin(t, "M1", "k", "h1", "cmd-2", time.Minute, day)
		wantOutcome(t, out, storage.IdemInFlight)
		if rec.CommandID != "cmd-1" {
			t.Fatalf("in-flight record command %q, want cmd-1", rec.CommandID)
		}
	})

	t.Run("AfterComplete_ReplaysStoredResponse", func(t *testing.T) {
		t.Parallel()
		b := setupIdem(t)
		b.begin(t, "M1", "k", "h1", "cmd-1", time.Minute, day)
		b.complete(t, "k", 201, `{"ok":true}`)
		out, rec := b.begin(t, "M1", "k", "h1", "cmd-2", time.Minute, day)
		wantOutcome(t, out, storage.IdemReplay)
		if rec.ResponseStatus == nil || *rec.ResponseStatus != 201 || string(rec.ResponseBody) != `{"ok":true}` || rec.CommandID != "cmd-1" {
			t.Fatalf("replayed record %+v", rec)
		}
		if rec.LockedUntil != nil {
			t.Fatalf("completed record still locked until %v", rec.LockedUntil)
		}
	})

	t.Run("DifferentRequest_Mismatch", func(t *testing.T) {
		t.Parallel()
		b := setupIdem(t)
		b.begin(t, "M1", "k", "h1", "cmd-1", time.Minute, day)
		out, _ := b.begin(t, "M1", "k", "h2", "cmd-2", time.Minute, day)
		wantOutcome(t, out, storage.IdemMismatch)
		b.complete(t, "k", 200, `{}`)
		out, _ = b.begin(t, "M1", "k", "h2", "cmd-3", time.Minute, day)
		wantOutcome(t, out, storage.IdemMismatch)
	})

	t.Run("ScopedByMerchant", func(t *testing.T) {
		t.Parallel()
		b := setupIdem(t)
		b.begin(t, "M1", "k", "h1", "cmd-1", time.Minute, day)
		out, rec := b.begin(t, "M2", "k", "h2", "cmd-2", time.Minute, day)
		wantOutcome(t, out, storage.IdemProceed)
		if rec.CommandID != "cmd-2" {
			t.Fatalf("M2's record command %q", rec.CommandID)
		}
	})

	t.Run("LockExpired_TakeoverKeepsCommandID", func(t *testing.T) {
		t.Parallel()
		b := setupIdem(t)
		b.begin(t, "M1", "k", "h1", "cmd-1", time.Millisecond, day)
		b.age(t, "k", "locked_until")
		out, rec := b.begin(t, "M1", "k", "h1", "cmd-2", time.Minute, day)
		wantOutcome(t, out, storage.IdemProceed)
		if rec.CommandID != "cmd-1" {
			t.Fatalf("takeover command %q, want the original cmd-1 so the engine dedupes", rec.CommandID)
		}
		// The taker now holds a fresh lock.
		out, _ = b.begin(t, "M1", "k", "h1", "cmd-3", time.Minute, day)
		wantOutcome(t, out, storage.IdemInFlight)
	})

	t.Run("Release_AllowsImmediateRetry", func(t *testing.T) {
		t.Parallel()
		b := setupIdem(t)
		b.begin(t, "M1", "k", "h1", "cmd-1", time.Hour, day)
		b.release(t, "k")
		out, rec := b.begin(t, "M1", "k", "h1", "cmd-2", time.Hour, day)
		wantOutcome(t, out, storage.IdemProceed)
		if rec.CommandID != "cmd-1" {
			t.Fatalf("retry after release command %q, want cmd-1", rec.CommandID)
		}
	})

	t.Run("ReleaseAfterComplete_KeepsResponse", func(t *testing.T) {
		t.Parallel()
		b := setupIdem(t)
		b.begin(t, "M1", "k", "h1", "cmd-1", time.Hour, day)
		b.complete(t, "k", 400, `{"e":1}`)
		b.release(t, "k")
		out, rec := b.begin(t, "M1", "k", "h1", "cmd-2", time.Hour, day)
		wantOutcome(t, out, storage.IdemReplay)
		if *rec.ResponseStatus != 400 {
			t.Fatalf("status %d", *rec.ResponseStatus)
		}
	})

	t.Run("OlderThanRetain_StartsAfresh", func(t *testing.T) {
		t.Parallel()
		b := setupIdem(t)
		b.begin(t, "M1", "k", "h1", "cmd-1", time.Hour, day)
		b.complete(t, "k", 201, `{}`)
		b.age(t, "k", "created_at")
		// With a retain shorter than the record's age, even a different request proceeds.
		out, rec := b.begin(t, "M1", "k", "h2", "cmd-2", time.Hour, 10*time.Millisecond)
		wantOutcome(t, out, storage.IdemProceed)
		if rec.CommandID != "cmd-2" || string(rec.RequestHash) != "h2" || rec.ResponseStatus != nil {
			t.Fatalf("fresh record %+v", rec)
		}
		if n := count(t, b.db, "idempotency_keys"); n != 1 {
			t.Fatalf("%d records, want 1", n)
		}
	})

	t.Run("Prune_DeletesOldRecords", func(t *testing.T) {
		t.Parallel()
		b := setupIdem(t)
		b.begin(t, "M1", "old", "h", "cmd-1", time.Hour, day)
		if _, err := b.db.ExecContext(b.ctx, `UPDATE idempotency_keys SET created_at = now() - interval '2 days' WHERE idem_key = 'old'`); err != nil {
			t.Fatal(err)
		}
		b.begin(t, "M1", "new", "h", "cmd-2", time.Hour, day)
		n, err := storage.PruneIdempotency(b.ctx, b.db, day, 100)
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 || count(t, b.db, "idempotency_keys") != 1 {
			t.Fatalf("pruned %d, left %d; want 1 and 1", n, count(t, b.db, "idempotency_keys"))
		}
		out, _ := b.begin(t, "M1", "new", "h", "cmd-3", time.Hour, day)
		wantOutcome(t, out, storage.IdemInFlight)
	})
}
