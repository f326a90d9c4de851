package aggregatetest

import (
	"reflect"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/anthdm/hollywood/actor"
	"github.com/cockroachdb/apd/v3"

	"paysvc/actors/engine/aggregate"
	"paysvc/actors/values/money"
)

// Actor is one aggregate actor under test. Engine, PID and Replies are there
// for a test that sends the shell a message of its own.
type Actor[S any] struct {
	Engine  *actor.Engine
	PID     *actor.PID
	Replies chan aggregate.Response
	corr    atomic.Uint64
}

// Spawn starts an actor of kind hydrated from start, stopped when the test ends.
func Spawn[S any](t *testing.T, kind string, start S, step aggregate.Step[S]) *Actor[S] {
	t.Helper()
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	a := &Actor[S]{Engine: e, Replies: make(chan aggregate.Response, 4)}
	a.PID = e.Spawn(aggregate.Producer(kind, start, step), kind, actor.WithID(t.Name()))
	t.Cleanup(func() { <-e.Poison(a.PID).Done() })
	return a
}

// Wait returns the next response, failing the test after a timeout.
func (a *Actor[S]) Wait(t *testing.T) aggregate.Response {
	t.Helper()
	select {
	case r := <-a.Replies:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("actor did not answer")
		return aggregate.Response{}
	}
}

// Request sends cmd and returns its response, which must carry its CorrID.
func (a *Actor[S]) Request(t *testing.T, cmd any) aggregate.Response {
	t.Helper()
	corr := 1000 + a.corr.Add(1)
	return a.ask(t, "reply", corr, aggregate.Request{CorrID: corr, Cmd: cmd, Reply: a.Replies})
}

// Get asks for the actor's state.
func (a *Actor[S]) Get(t *testing.T) aggregate.Response {
	t.Helper()
	corr := 5000 + a.corr.Add(1)
	return a.ask(t, "Get reply", corr, aggregate.Get{CorrID: corr, Reply: a.Replies})
}

// Restore puts s back as the actor's state.
func (a *Actor[S]) Restore(t *testing.T, s S) aggregate.Response {
	t.Helper()
	corr := 9000 + a.corr.Add(1)
	return a.ask(t, "restore reply", corr, aggregate.Restore{CorrID: corr, State: s, Reply: a.Replies})
}

func (a *Actor[S]) ask(t *testing.T, what string, corr uint64, msg any) aggregate.Response {
	t.Helper()
	a.Engine.Send(a.PID, msg)
	r := a.Wait(t)
	if r.CorrID != corr {
		t.Fatalf("%s CorrID = %d, want %d", what, r.CorrID, corr)
	}
	return r
}

// NaNAmount returns a money.Amount whose hidden apd.Decimal is NaN (and so
// positive to Sign): valid values cannot make Apply panic, this one does, inside
// money. It skips the test if money.Amount no longer has that shape.
func NaNAmount(t *testing.T) money.Amount {
	t.Helper()
	a := money.FromUnits(100)
	v := reflect.ValueOf(&a).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Type() == reflect.TypeOf(apd.Decimal{}) {
			d := (*apd.Decimal)(unsafe.Pointer(f.UnsafeAddr()))
			d.Form = apd.NaN
			if a.Sign() <= 0 {
				t.Skip("a NaN amount is not positive: Apply would refuse it before panicking")
			}
			return a
		}
	}
	t.Skip("money.Amount has no apd.Decimal field: cannot provoke a panic in Apply")
	return a
}
