package rails_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/rails"
	"paysvc/actors/rails/mpesa"
	"paysvc/actors/rails/mpesa/mpesatest"
	"paysvc/actors/values/money"
	"paysvc/actors/values/waittest"
	"paysvc/storage"
	"paysvc/storage/storagetest"
	"paysvc/topics"
)

// sink records what a rail reports and, as the engine would, applies a
// submission (PENDING -> PROCESSING) unless refuse says the engine refuses it.
type sink struct {
	mu     sync.Mutex
	got    []topics.PayoutResults
	db     *sqlx.DB
	refuse func() bool
}

func (s *sink) put(ctx context.Context, r topics.PayoutResults) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, r)
	if r.Stage == topics.PayoutStageSubmitted && s.db != nil && (s.refuse == nil || !s.refuse()) {
		for _, x := range r.Results {
			if _, err := s.db.ExecContext(ctx, `UPDATE payout_transactions SET status = 'PROCESSING' WHERE transaction_id = $1 AND status = 'PENDING'`, x.TransactionID); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *sink) take() []topics.PayoutResults {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.got
	s.got = nil
	return out
}

type b2cBundle struct {
	fake *mpesatest.FakeDaraja
	rail *rails.DarajaB2C
	sink *sink
	db   storagetest.Schema
}

func setupB2C(t *testing.T) *b2cBundle {
	t.Helper()
	fake := mpesatest.NewFakeDaraja()
	t.Cleanup(fake.Close)
	payer, err := mpesa.NewB2C(fake.B2CConfig("", "https://pay.example/r/tok", "https://pay.example/t/tok"), nil)
	if err != nil {
		t.Fatal(err)
	}
	db := storagetest.New(t)
	s := &sink{db: db.DB}
	// The rail sends only transactions still due in PostgreSQL: file F1 is being paid.
	db.DB.MustExec(`INSERT INTO merchants (merchant_id, name, environment) VALUES ('M1', 'Payer', 'live')`)
	db.DB.MustExec(`INSERT INTO payout_files (file_id, merchant_id, tracking_id, status, version, data, created_at, updated_at)
		VALUES ('F1', 'M1', gen_random_uuid(), 'PROCESSING', 2, '{}', now(), now())`)
	return &b2cBundle{fake: fake, sink: s, db: db,
		rail: &rails.DarajaB2C{Payer: payer, DB: db.DB, Sink: s.put, Pause: time.Millisecond, Environment: "live"}}
}

// chunk is a request for transactions of F1, each recorded PENDING (once).
func (b *b2cBundle) chunk(t *testing.T, provider string, ids ...string) topics.PayoutRailRequest {
	t.Helper()
	req := topics.PayoutRailRequest{FileID: "F1", MerchantID: "M1", Provider: provider, Currency: "KES"}
	for i, id := range ids {
		req.Transactions = append(req.Transactions, topics.PayoutRailTxn{TransactionID: id,
			Account: "25471234000" + string(rune('0'+i)), Amount: money.MustParse("100"), Narrative: "Salary"})
		b.db.DB.MustExec(`INSERT INTO payout_transactions (transaction_id, file_id, merchant_id, seq, status, provider, account, data, created_at, updated_at)
			VALUES ($1, 'F1', 'M1', (SELECT count(*) FROM payout_transactions), 'PENDING', $2, $3, '{}', now(), now())
			ON CONFLICT (transaction_id) DO NOTHING`, id, provider, req.Transactions[i].Account)
	}
	return req
}

// finish records a transaction's outcome as the engine would.
func (b *b2cBundle) finish(t *testing.T, id, status string) {
	t.Helper()
	b.db.DB.MustExec(`UPDATE payout_transactions SET status = $2 WHERE transaction_id = $1`, id, status)
}

// sent counts the B2C requests Daraja received for each transaction.
func (b *b2cBundle) sent() map[string]int {
	n := map[string]int{}
	for _, r := range b.fake.B2CRequests() {
		n[r.OriginatorConversationID]++
	}
	return n
}

// outcomes flattens reports into transaction -> "STAGE" or "FINAL:description".
func outcomes(rs []topics.PayoutResults) map[string]string {
	out := map[string]string{}
	for _, r := range rs {
		if r.FileID != "F1" || r.MerchantID != "M1" || r.Batch == "" {
			panic("report without file, merchant or batch")
		}
		for _, x := range r.Results {
			v := r.Stage
			if r.Stage == topics.PayoutStageFinal {
				v += ":" + x.Description
			}
			out[x.TransactionID] = v
		}
	}
	return out
}

func TestDarajaB2C(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("SendsEachOnce_RedeliveryReportsTheSame", func(t *testing.T) {
		t.Parallel()
		b := setupB2C(t)
		req := b.chunk(t, "MPESA-B2C", "T1", "T2")
		if err := b.rail.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
		first := b.sink.take()
		if got := outcomes(first); got["T1"] != "SUBMITTED" || got["T2"] != "SUBMITTED" || len(first) != 2 {
			t.Fatalf("reports %+v", first)
		}
		if err := b.rail.Submit(ctx, req); err != nil { // redelivered, or resubmitted by recovery
			t.Fatal(err)
		}
		// Both are PROCESSING (submitted, and sent): nothing is reported or sent again.
		if again := b.sink.take(); len(again) != 0 {
			t.Fatalf("a resubmission of submitted transactions reported %+v", again)
		}
		if n := b.sent(); n["T1"] != 1 || n["T2"] != 1 || len(n) != 2 {
			t.Fatalf("sent %v, want each once", n)
		}
	})

	t.Run("Refusal_FailsWithDarajasDescription", func(t *testing.T) {
		t.Parallel()
		b := setupB2C(t)
		b.fake.FailNextB2C(http.StatusBadRequest, "400.002.02", "Bad Request - Invalid PartyB")
		req := b.chunk(t, "MPESA-B2C", "T1", "T2")
		if err := b.rail.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
		got := outcomes(b.sink.take())
		if got["T1"] != "FINAL:M-Pesa refused the payout: Bad Request - Invalid PartyB" || got["T2"] != "SUBMITTED" {
			t.Fatalf("outcomes %v", got)
		}
		// Submitted again: the same refusal, nothing sent.
		if err := b.rail.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
		if again := outcomes(b.sink.take()); again["T1"] != got["T1"] || len(b.fake.B2CRequests()) != 1 {
			t.Fatalf("resubmission: %v, %d requests", again, len(b.fake.B2CRequests()))
		}
	})

	t.Run("TransportError_NeverSentAgain", func(t *testing.T) {
		t.Parallel()
		b := setupB2C(t)
		clock := waittest.NewClock(time.Now())
		b.rail.Now = clock.Now
		b.fake.FailNextB2C(0, "", "") // Daraja takes T1, the answer is lost
		req := b.chunk(t, "MPESA-B2C", "T1", "T2")
		err := b.rail.Submit(ctx, req)
		if !errors.Is(err, mpesa.ErrUnavailable) {
			t.Fatalf("Submit = %v, want the unknown outcome", err)
		}
		if got := outcomes(b.sink.take()); got["T1"] != "SUBMITTED" || got["T2"] != "" {
			t.Fatalf("after the lost answer: %v (T1 stays PROCESSING, T2 waits)", got)
		}
		var st storage.PayoutSend
		if err := b.db.DB.Get(&st, `SELECT * FROM payout_sends WHERE transaction_id = 'T1'`); err != nil || st.State != storage.PayoutSendUnknown {
			t.Fatalf("T1 send %+v, %v", st, err)
		}
		clock.Advance(b.rail.Pause) // the pause after an unknown outcome runs out
		for range 3 {               // RunPayouts retrying, RecoverPayouts resubmitting
			if err := b.rail.Submit(ctx, req); err != nil {
				t.Fatal(err)
			}
		}
		if n := b.sent(); n["T1"] != 1 || n["T2"] != 1 {
			t.Fatalf("sent %v: T1 must never be sent again", n)
		}
	})

	t.Run("PausedAfterUnknown", func(t *testing.T) {
		t.Parallel()
		b := setupB2C(t)
		b.rail.Pause = time.Hour
		b.fake.FailNextB2C(http.StatusBadGateway, "", "")
		if err := b.rail.Submit(ctx, b.chunk(t, "MPESA-B2C", "T1")); err == nil {
			t.Fatal("unknown outcome not reported as an error")
		}
		before := len(b.fake.B2CRequests())
		if err := b.rail.Submit(ctx, b.chunk(t, "MPESA-B2C", "T2")); err == nil || len(b.fake.B2CRequests()) != before {
			t.Fatalf("sent during the pause: %v", err)
		}
		var n int
		if err := b.db.DB.Get(&n, `SELECT count(*) FROM payout_sends WHERE transaction_id = 'T2'`); err != nil || n != 0 {
			t.Fatalf("T2 claimed during the pause: %d, %v", n, err)
		}
	})

	t.Run("Unreachable_ReleasedAndSentLater", func(t *testing.T) {
		t.Parallel()
		b := setupB2C(t)
		dead := mpesatest.NewFakeDaraja()
		dead.Close()
		payer, err := mpesa.NewB2C(dead.B2CConfig("", "https://pay.example/r/tok", "https://pay.example/t/tok"), nil)
		if err != nil {
			t.Fatal(err)
		}
		live := b.rail.Payer
		b.rail.Payer = payer
		req := b.chunk(t, "MPESA-B2C", "T1")
		if err := b.rail.Submit(ctx, req); err == nil {
			t.Fatal("Submit with Daraja unreachable succeeded")
		}
		// Submitted (PROCESSING) before the attempt, and no outcome: it waits to be sent.
		if got := outcomes(b.sink.take()); len(got) != 1 || got["T1"] != "SUBMITTED" {
			t.Fatalf("reported %v though nothing was sent", got)
		}
		b.rail.Payer = live
		if err := b.rail.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
		if n := b.sent(); n["T1"] != 1 {
			t.Fatalf("sent %v", n)
		}
	})

	// The submission is on the command log before the request leaves, so Daraja's
	// result, produced after Daraja took the request, always follows it.
	t.Run("SubmissionReportedBeforeTheSend", func(t *testing.T) {
		t.Parallel()
		b := setupB2C(t)
		var mu sync.Mutex
		sentAtReport := map[string]int{}
		b.rail.Sink = func(ctx context.Context, r topics.PayoutResults) error {
			if r.Stage == topics.PayoutStageSubmitted {
				mu.Lock()
				for _, x := range r.Results {
					sentAtReport[x.TransactionID] = b.sent()[x.TransactionID]
				}
				mu.Unlock()
			}
			return b.sink.put(ctx, r)
		}
		if err := b.rail.Submit(ctx, b.chunk(t, "MPESA-B2C", "T1", "T2")); err != nil {
			t.Fatal(err)
		}
		if n := b.sent(); n["T1"] != 1 || n["T2"] != 1 {
			t.Fatalf("sent %v", n)
		}
		mu.Lock()
		defer mu.Unlock()
		if v, ok := sentAtReport["T1"]; !ok || v != 0 || sentAtReport["T2"] != 0 || len(sentAtReport) != 2 {
			t.Fatalf("requests already sent when each submission was reported: %v, want 0 each", sentAtReport)
		}
	})

	// A transaction a result finished (a forged failure that released its hold, an
	// operator's finish) is not sent, however its chunk comes back.
	t.Run("FinishedTransactionNotSent", func(t *testing.T) {
		t.Parallel()
		b := setupB2C(t)
		req := b.chunk(t, "MPESA-B2C", "T1", "T2", "T3")
		b.finish(t, "T1", "FAILED")
		b.finish(t, "T3", "COMPLETE")
		if err := b.rail.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
		if n := b.sent(); n["T1"] != 0 || n["T3"] != 0 || n["T2"] != 1 {
			t.Fatalf("sent %v, want T2 only", n)
		}
		if got := outcomes(b.sink.take()); len(got) != 1 || got["T2"] != "SUBMITTED" {
			t.Fatalf("reported %v, want T2 submitted only", got)
		}
		var n int
		if err := b.db.DB.Get(&n, `SELECT count(*) FROM payout_sends WHERE transaction_id IN ('T1', 'T3')`); err != nil || n != 0 {
			t.Fatalf("finished transactions claimed: %d, %v", n, err)
		}
	})

	// The kill switches (docs/security.md): the rail reads the merchant and the file
	// at the moment it sends, not at approval, and sends only once the engine took
	// the submission.
	t.Run("DisabledMerchantOrHeldFileNotSent", func(t *testing.T) {
		t.Parallel()
		b := setupB2C(t)
		req := b.chunk(t, "MPESA-B2C", "T1", "T2")
		b.db.DB.MustExec(`UPDATE merchants SET enabled = false WHERE merchant_id = 'M1'`)
		if err := b.rail.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
		if n, got := b.sent(), b.sink.take(); len(n) != 0 || len(got) != 0 {
			t.Fatalf("disabled merchant: sent %v, reported %+v", n, got)
		}
		b.db.DB.MustExec(`UPDATE merchants SET enabled = true WHERE merchant_id = 'M1'`)
		b.db.DB.MustExec(`UPDATE payout_files SET data = '{"on_hold": true}' WHERE file_id = 'F1'`)
		if err := b.rail.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
		if n := b.sent(); len(n) != 0 {
			t.Fatalf("held file: sent %v", n)
		}
		b.db.DB.MustExec(`UPDATE payout_files SET data = '{"on_hold": false}' WHERE file_id = 'F1'`)
		if err := b.rail.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
		if n := b.sent(); n["T1"] != 1 || n["T2"] != 1 {
			t.Fatalf("enabled and released: sent %v, want each once", n)
		}
	})

	// The engine refuses the submission (its merchant was disabled after the rail
	// read it): the request never leaves, and a later attempt is a new command.
	t.Run("RefusedSubmissionNotSent", func(t *testing.T) {
		t.Parallel()
		b := setupB2C(t)
		b.rail.SubmitWait = 50 * time.Millisecond
		refuse := true
		b.sink.refuse = func() bool { return refuse }
		req := b.chunk(t, "MPESA-B2C", "T1")
		if err := b.rail.Submit(ctx, req); err == nil {
			t.Fatal("a submission the engine never applied did not stop the chunk")
		}
		if n := b.sent(); len(n) != 0 {
			t.Fatalf("sent %v though the engine refused the submission", n)
		}
		first := b.sink.take()
		refuse = false
		if err := b.rail.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
		again := b.sink.take()
		if len(first) != 1 || len(again) != 1 || first[0].Batch == again[0].Batch {
			t.Fatalf("attempts %+v then %+v: each must be its own command", first, again)
		}
		if n := b.sent(); n["T1"] != 1 {
			t.Fatalf("sent %v", n)
		}
	})

	// An operator's fail applied before the submission: the transaction is FAILED
	// (its hold released) when the rail looks again, and is never paid.
	t.Run("FailedFirstNotSent", func(t *testing.T) {
		t.Parallel()
		b := setupB2C(t)
		req := b.chunk(t, "MPESA-B2C", "T1")
		b.sink.refuse = func() bool {
			b.db.DB.MustExec(`UPDATE payout_transactions SET status = 'FAILED' WHERE transaction_id = 'T1'`)
			return true
		}
		if err := b.rail.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
		if n := b.sent(); len(n) != 0 {
			t.Fatalf("sent %v", n)
		}
	})

	t.Run("OtherProviders_NotConfigured", func(t *testing.T) {
		t.Parallel()
		b := setupB2C(t)
		if err := b.rail.Submit(ctx, b.chunk(t, "PESALINK", "T1")); err != nil {
			t.Fatal(err)
		}
		if got := outcomes(b.sink.take()); !strings.Contains(got["T1"], "PESALINK is not configured") || len(b.fake.B2CRequests()) != 0 {
			t.Fatalf("outcomes %v", got)
		}
	})
}
