package wallet_test

import (
	"errors"
	"strings"
	"testing"

	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/engine/aggregate"
	"paysvc/actors/engine/aggregate/aggregatetest"
	"paysvc/actors/values/ledger"
)

type actorBundle struct {
	*aggregatetest.Actor[wallet.State]
	start wallet.State
}

// setupActor spawns a wallet actor hydrated from a funded KES wallet.
func setupActor(t *testing.T) *actorBundle {
	t.Helper()
	s := fund(t, open(t, "W1", "M1", "KES"), "100.00")
	return &actorBundle{Actor: aggregatetest.Spawn(t, "wallet", s, wallet.Step), start: s}
}

// response is the shell's answer as a wallet's: the states, and the entries
// Step returned as what it says of the change.
type response struct {
	CorrID uint64
	Before wallet.State
	Result wallet.Result
	Err    error
}

func typed(r aggregate.Response) response {
	es, _ := r.Out.([]ledger.Entry)
	before, _ := r.Before.(wallet.State)
	after, _ := r.After.(wallet.State)
	return response{CorrID: r.CorrID, Before: before, Result: wallet.Result{State: after, Entries: es}, Err: r.Err}
}

// wait returns the next response, failing the test after a timeout.
func (b *actorBundle) wait(t *testing.T) response {
	t.Helper()
	return typed(b.Wait(t))
}

func (b *actorBundle) request(t *testing.T, cmd any) (uint64, response) {
	t.Helper()
	r := b.Request(t, cmd)
	return r.CorrID, typed(r)
}

func (b *actorBundle) get(t *testing.T) wallet.State {
	t.Helper()
	r := typed(b.Get(t))
	if r.Err != nil {
		t.Fatalf("Get: %v", r.Err)
	}
	return r.Result.State
}

// wantAfter fails the test unless the actor's state is the one commands
// commands after its start, both balances at balance.
func (b *actorBundle) wantAfter(t *testing.T, commands int64, balance string) {
	t.Helper()
	s := b.get(t)
	wantBalance(t, s, balance, balance)
	if s.Version != b.start.Version+commands {
		t.Fatalf("version = %d, want %d", s.Version, b.start.Version+commands)
	}
}

func deposit(amount string) wallet.Deposit {
	return wallet.Deposit{MerchantID: "M1", TransactionID: "T", Amount: amt(amount), At: at}
}

func TestActor(t *testing.T) {
	t.Parallel()

	t.Run("Get_ReturnsHydratedState", func(t *testing.T) {
		t.Parallel()
		b := setupActor(t)
		s := b.get(t)
		if s.WalletID != "W1" || s.Version != b.start.Version || !s.CurrentBalance.Equal(amt("100.00")) {
			t.Fatalf("hydrated state %+v, want %+v", s, b.start)
		}
	})

	t.Run("Request_SuccessAdoptsStateAndEchoesCorrID", func(t *testing.T) {
		t.Parallel()
		b := setupActor(t)
		_, r := b.request(t, deposit("25.00"))
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if r.Before.Version != b.start.Version || !r.Before.CurrentBalance.Equal(amt("100.00")) {
			t.Fatalf("Before = %+v, want the hydrated state", r.Before)
		}
		wantBalance(t, r.Result.State, "125.00", "125.00")
		if len(r.Result.Entries) != 2 {
			t.Fatalf("got %d entries, want 2", len(r.Result.Entries))
		}
		b.wantAfter(t, 1, "125.00")
	})

	t.Run("Request_FailureLeavesState", func(t *testing.T) {
		t.Parallel()
		b := setupActor(t)
		dst := open(t, "W2", "M1", "KES")
		_, r := b.request(t, wallet.TransferOut{MerchantID: "M1", TransactionID: "T", Amount: amt("100.01"), Destination: dst, At: at})
		var ins wallet.InsufficientFundsError
		if !errors.As(r.Err, &ins) {
			t.Fatalf("err = %v, want InsufficientFundsError", r.Err)
		}
		if r.Result.State.Version != b.start.Version || len(r.Result.Entries) != 0 {
			t.Fatalf("failed request result %+v, want the unchanged state and no entries", r.Result)
		}
		s := b.get(t)
		if s.Version != b.start.Version || !s.CurrentBalance.Equal(amt("100.00")) {
			t.Fatalf("state after refused command %+v", s)
		}
		// The actor still works.
		if _, r := b.request(t, deposit("1.00")); r.Err != nil {
			t.Fatal(r.Err)
		}
		wantBalance(t, b.get(t), "101.00", "101.00")
	})

	t.Run("Request_UnknownCommandIsAnError", func(t *testing.T) {
		t.Parallel()
		b := setupActor(t)
		_, r := b.request(t, struct{}{})
		if r.Err == nil {
			t.Fatal("unknown command succeeded")
		}
		if s := b.get(t); s.Version != b.start.Version {
			t.Fatalf("version moved to %d", s.Version)
		}
	})

	t.Run("Restore_PutsBackBefore", func(t *testing.T) {
		t.Parallel()
		b := setupActor(t)
		_, r := b.request(t, deposit("10.00"))
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		wantBalance(t, b.get(t), "110.00", "110.00")
		b.Engine.Send(b.PID, aggregate.Restore{CorrID: 77, State: r.Before, Reply: b.Replies})
		rr := b.wait(t)
		if rr.CorrID != 77 || rr.Result.State.Version != b.start.Version {
			t.Fatalf("restore reply %+v", rr)
		}
		s := b.get(t)
		if s.Version != b.start.Version || !s.CurrentBalance.Equal(amt("100.00")) {
			t.Fatalf("state after restore %+v, want the one before the deposit", s)
		}
	})

	t.Run("Request_ManyInOrder", func(t *testing.T) {
		t.Parallel()
		b := setupActor(t)
		for i := 0; i < 50; i++ {
			if _, r := b.request(t, deposit("1.00")); r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		b.wantAfter(t, 50, "150.00")
	})

	// Apply cannot be made to panic through valid values: money.Amount only holds
	// finite two-place decimals. The test corrupts an Amount's hidden decimal into
	// NaN (through reflect and unsafe) so that Apply panics inside money, and checks
	// the actor's recovery: a PanicError reply with the caller's CorrID, the state
	// kept (not reset to the hydration snapshot, which a hollywood restart would
	// do), and the actor still answering.
	t.Run("Request_PanicBecomesPanicError", func(t *testing.T) {
		t.Parallel()
		b := setupActor(t)
		if _, r := b.request(t, deposit("5.00")); r.Err != nil {
			t.Fatal(r.Err)
		}
		bad := aggregatetest.NaNAmount(t)
		_, r := b.request(t, wallet.Deposit{MerchantID: "M1", TransactionID: "T", Amount: bad, At: at})
		var pe aggregate.PanicError
		if !errors.As(r.Err, &pe) {
			t.Fatalf("err = %v (%T), want PanicError", r.Err, r.Err)
		}
		if pe.Value == nil || !strings.Contains(pe.Error(), "panicked") {
			t.Fatalf("PanicError %q carries no value", pe.Error())
		}
		if r.Result.State.Version != b.start.Version+1 || len(r.Result.Entries) != 0 {
			t.Fatalf("panic result %+v, want the state before the command and no entries", r.Result)
		}
		b.wantAfter(t, 1, "105.00")
		if _, r := b.request(t, deposit("1.00")); r.Err != nil {
			t.Fatalf("actor broken after panic: %v", r.Err)
		}
		wantBalance(t, b.get(t), "106.00", "106.00")
	})
}
