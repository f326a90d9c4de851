package aggregate

import (
	"fmt"

	"github.com/anthdm/hollywood/actor"
)

// Step is an aggregate's pure transition: the next state, what the caller needs of
// the change (a wallet's ledger entries, a file's delta), or a refusal that leaves
// the state as it was. It must not keep or change state: the shell may still hold
// the state it was given.
type Step[S any] func(state S, cmd any) (next S, out any, err error)

// Request asks the actor to apply Cmd through its Step. The actor answers on Reply
// with the same CorrID: hollywood's own request ids are random 31-bit numbers that
// were seen to collide, so the engine correlates with ids of its own.
type Request struct {
	CorrID uint64
	Cmd    any
	Reply  chan<- Response
}

// Get asks for the current state without changing it.
type Get struct {
	CorrID uint64
	Reply  chan<- Response
}

// Restore puts a state back: one returned earlier as Before (a later step of the
// same command failed, or the command was refused).
type Restore struct {
	CorrID uint64
	State  any
	Reply  chan<- Response
}

// Response is the actor's answer. Before is the state the message found, After
// the state it left (Before again on a refusal), Out what Step said of the change.
type Response struct {
	CorrID        uint64
	Before, After any
	Out           any
	Err           error
}

// Corr is the correlation id.
func (r Response) Corr() uint64 { return r.CorrID }

// PanicError is the answer to a command whose Step panicked: the state is left as
// it was and the engine sets that command aside.
type PanicError struct {
	Kind  string
	Value any
}

func (e PanicError) Error() string { return fmt.Sprintf("%s: apply panicked: %v", e.Kind, e.Value) }

// ErrNoStep refuses a Request to an actor whose kind has no Step (its instances
// are only read).
var ErrNoStep = fmt.Errorf("aggregate: this kind's instances have no step")

// Actor holds one instance's state between messages.
type Actor[S any] struct {
	kind  string
	state S
	step  Step[S]
}

// Producer returns a hollywood producer of an actor of kind hydrated from s
// (step nil: a kind whose instances are only read).
func Producer[S any](kind string, s S, step Step[S]) actor.Producer {
	return func() actor.Receiver { return &Actor[S]{kind: kind, state: s, step: step} }
}

// Receive is only the switch: behaviour lives in the kind's Step.
func (a *Actor[S]) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case Request:
		m.Reply <- a.apply(m)
	case Get:
		m.Reply <- Response{CorrID: m.CorrID, Before: a.state, After: a.state}
	case Restore:
		var s S
		if m.State != nil {
			s = m.State.(S)
		}
		a.state = s
		m.Reply <- Response{CorrID: m.CorrID, Before: s, After: s}
	}
}

// apply runs Step with a panic contained, adopting the new state only on success.
func (a *Actor[S]) apply(m Request) (resp Response) {
	resp = Response{CorrID: m.CorrID, Before: a.state, After: a.state}
	defer func() {
		if r := recover(); r != nil {
			resp.After, resp.Out = a.state, nil
			resp.Err = PanicError{Kind: a.kind, Value: r}
		}
	}()
	if a.step == nil {
		resp.Err = ErrNoStep
		return resp
	}
	n, out, err := a.step(a.state, m.Cmd)
	if err != nil {
		resp.Err = err
		return resp
	}
	a.state = n
	resp.After, resp.Out = n, out
	return resp
}
