package payout_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	pf "paysvc/actors/aggregates/payout"
	"paysvc/actors/engine/aggregate"
	"paysvc/actors/engine/aggregate/aggregatetest"
)

type actorBundle struct {
	*aggregatetest.Actor[pf.State]
	start pf.State
}

// setupActor spawns a file actor hydrated from start.
func setupActor(t *testing.T, start pf.State) *actorBundle {
	t.Helper()
	return &actorBundle{Actor: aggregatetest.Spawn(t, "payout", start, pf.Step), start: start}
}

// response is the shell's answer as a file's: the states, and the Delta Step
// returned as what it says of the change.
type response struct {
	CorrID        uint64
	Before, After pf.State
	Delta         pf.Delta
	Err           error
}

func typed(r aggregate.Response) response {
	d, _ := r.Out.(pf.Delta)
	before, _ := r.Before.(pf.State)
	after, _ := r.After.(pf.State)
	return response{CorrID: r.CorrID, Before: before, After: after, Delta: d, Err: r.Err}
}

func (b *actorBundle) request(t *testing.T, cmd any) response {
	t.Helper()
	return typed(b.Request(t, cmd))
}

// peek reads the actor's state: the actor has no Get, and a command Apply does not
// know is refused with the current state as After.
func (b *actorBundle) peek(t *testing.T) pf.State {
	t.Helper()
	r := b.request(t, struct{}{})
	if r.Err == nil {
		t.Fatal("peek command accepted")
	}
	if !reflect.DeepEqual(r.Before, r.After) {
		t.Fatal("peek changed the state")
	}
	return r.After
}

func (b *actorBundle) restore(t *testing.T, s pf.State) {
	t.Helper()
	r := typed(b.Restore(t, s))
	if r.Err != nil || !reflect.DeepEqual(r.After, s) || !reflect.DeepEqual(r.Before, s) {
		t.Fatalf("restore reply %+v", r)
	}
}

func TestActor(t *testing.T) {
	t.Parallel()

	t.Run("Request_CreateOnEmptyActor", func(t *testing.T) {
		t.Parallel()
		b := setupActor(t, pf.State{})
		r := b.request(t, pf.Create{Header: header(), Txns: threeTxns(), At: at})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if r.Before.Exists() || r.After.Version != 1 || r.After.Status != pf.StatusPreview || !r.Delta.Moved || len(r.Delta.Changed) != 3 {
			t.Fatalf("response %+v", r)
		}
		if s := b.peek(t); !reflect.DeepEqual(s, r.After) {
			t.Fatalf("actor holds %+v, want %+v", s, r.After)
		}
		if r := b.request(t, pf.Create{Header: header(), Txns: threeTxns(), At: at}); !errors.Is(r.Err, pf.ErrExists) {
			t.Fatalf("second create: %v", r.Err)
		}
	})

	t.Run("Request_SuccessAdoptsStateAndReturnsDelta", func(t *testing.T) {
		t.Parallel()
		b := setupActor(t, created(t))
		r := b.request(t, pf.Approve{SubmitNow: true, At: later})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if !reflect.DeepEqual(r.Before, b.start) {
			t.Fatalf("Before = %+v, want the hydrated state", r.Before)
		}
		want, wantDelta := mustApply(t, b.start, pf.Approve{SubmitNow: true, At: later})
		if !reflect.DeepEqual(r.After, want) || !reflect.DeepEqual(r.Delta, wantDelta) {
			t.Fatalf("After/Delta = %+v %+v, want what Apply gives", r.After, r.Delta)
		}
		r = b.request(t, final(ok("T1"), ko("T2")))
		if r.Err != nil || len(r.Delta.Paid) != 1 {
			t.Fatalf("results: %+v", r)
		}
		wantAmount(t, "release", r.Delta.Release, "252.75")
		s := b.peek(t)
		if s.Version != b.start.Version+2 || s.Status != pf.StatusProcessing {
			t.Fatalf("state %+v", s.Header)
		}
		wantAmount(t, "held", s.Held, "0.01")
	})

	t.Run("Request_RefusalLeavesState", func(t *testing.T) {
		t.Parallel()
		b := setupActor(t, processing(t, true))
		r := b.request(t, pf.Cancel{At: later})
		if !errors.Is(r.Err, pf.ErrNotCancellable) {
			t.Fatalf("err = %v", r.Err)
		}
		if !reflect.DeepEqual(r.Before, b.start) || !reflect.DeepEqual(r.After, b.start) || !reflect.DeepEqual(r.Delta, pf.Delta{}) {
			t.Fatalf("refused response %+v", r)
		}
		if s := b.peek(t); !reflect.DeepEqual(s, b.start) {
			t.Fatalf("state after refusal %+v", s)
		}
		if r := b.request(t, final(ok("T1"))); r.Err != nil {
			t.Fatalf("actor broken after refusal: %v", r.Err)
		}
	})

	t.Run("Restore_PutsBackBefore", func(t *testing.T) {
		t.Parallel()
		b := setupActor(t, created(t))
		r := b.request(t, pf.Approve{At: later})
		if r.Err != nil || r.After.Status != pf.StatusProcessing {
			t.Fatalf("approve %+v", r)
		}
		// A later step of the same command failed: the engine puts Before back.
		b.restore(t, r.Before)
		if s := b.peek(t); !reflect.DeepEqual(s, b.start) {
			t.Fatalf("state after restore %+v, want the hydrated one", s.Header)
		}
		// It awaits approval again, so it can be cancelled.
		if r := b.request(t, pf.Cancel{At: later}); r.Err != nil || r.After.Status != pf.StatusCancelled {
			t.Fatalf("cancel after restore: %+v", r)
		}
	})

	t.Run("Request_ManyInOrder", func(t *testing.T) {
		t.Parallel()
		txns := make([]pf.Txn, 20)
		for i := range txns {
			txns[i] = txn(string(rune('A'+i)), "1.00", "0.10")
		}
		b := setupActor(t, created(t, txns...))
		if r := b.request(t, pf.Approve{SubmitNow: true, At: at}); r.Err != nil {
			t.Fatal(r.Err)
		}
		for _, x := range txns {
			if r := b.request(t, final(ok(x.TransactionID))); r.Err != nil || len(r.Delta.Paid) != 1 {
				t.Fatalf("%s: %+v", x.TransactionID, r)
			}
		}
		s := b.peek(t)
		if s.Status != pf.StatusComplete || s.Version != b.start.Version+21 {
			t.Fatalf("state %+v", s.Header)
		}
		wantAmount(t, "held", s.Held, "0.00")
		wantAmount(t, "paid", s.PaidAmount, "20.00")
		wantAmount(t, "charges", s.ActualCharges, "2.00")
	})

	// Apply cannot panic on valid values; a snapshot with a NaN amount (forced in
	// through unsafe, as the wallet's test does) makes money panic inside Apply.
	t.Run("Request_PanicBecomesPanicErrorAndKeepsState", func(t *testing.T) {
		t.Parallel()
		start := created(t)
		start.Txns[1].Amount = aggregatetest.NaNAmount(t)
		b := setupActor(t, start)
		r := b.request(t, pf.Approve{At: later})
		var pe aggregate.PanicError
		if !errors.As(r.Err, &pe) {
			t.Fatalf("err = %v (%T), want PanicError", r.Err, r.Err)
		}
		if pe.Value == nil || !strings.Contains(pe.Error(), "panicked") {
			t.Fatalf("PanicError %q carries no value", pe.Error())
		}
		if !reflect.DeepEqual(r.Before, start) || !reflect.DeepEqual(r.After, start) || !reflect.DeepEqual(r.Delta, pf.Delta{}) {
			t.Fatalf("panic response %+v", r)
		}
		if s := b.peek(t); !reflect.DeepEqual(s, start) {
			t.Fatalf("state after panic %+v", s.Header)
		}
		// The actor still answers, and takes a good snapshot back.
		good := created(t)
		b.restore(t, good)
		if r := b.request(t, pf.Approve{At: later}); r.Err != nil || r.After.Status != pf.StatusProcessing {
			t.Fatalf("after panic: %+v", r)
		}
	})

	t.Run("Request_PanicInCreateLeavesEmptyActor", func(t *testing.T) {
		t.Parallel()
		b := setupActor(t, pf.State{})
		bad := threeTxns()
		bad[2].Charge = aggregatetest.NaNAmount(t)
		r := b.request(t, pf.Create{Header: header(), Txns: bad, At: at})
		var pe aggregate.PanicError
		if !errors.As(r.Err, &pe) {
			t.Fatalf("err = %v, want PanicError", r.Err)
		}
		if s := b.peek(t); s.Exists() {
			t.Fatalf("panicked create left %+v", s.Header)
		}
		if r := b.request(t, pf.Create{Header: header(), Txns: threeTxns(), At: at}); r.Err != nil {
			t.Fatalf("create after panic: %v", r.Err)
		}
	})
}
