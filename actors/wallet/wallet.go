package wallet

import (
	"fmt"

	"github.com/anthdm/hollywood/actor"
)

// Request asks the actor to apply Cmd. The actor answers on Reply with the same
// CorrID: hollywood's own Request ids are random 31-bit numbers that were seen to
// collide, so the engine correlates with ids of its own and checks them.
type Request struct {
	CorrID uint64
	Cmd    any
	Reply  chan<- Response
}

// Response is the actor's answer. Before is the state the command was applied to,
// so the engine can hand it back with Restore if a later step of the same command
// fails (a transfer whose credit side was refused).
type Response struct {
	CorrID uint64
	Before State
	Result Result
	Err    error
}

// Corr is the correlation id (the engine's generic round trip matches on it).
func (r Response) Corr() uint64 { return r.CorrID }

// Get asks for the current state without changing it.
type Get struct {
	CorrID uint64
	Reply  chan<- Response
}

// Restore puts back a state returned earlier as Before.
type Restore struct {
	CorrID uint64
	State  State
	Reply  chan<- Response
}

// PanicError is the result of a command whose Apply panicked: the state is left as
// it was and the engine refuses that command alone.
type PanicError struct{ Value any }

func (e PanicError) Error() string { return fmt.Sprintf("wallet: apply panicked: %v", e.Value) }

// Actor holds one wallet's state between commands.
type Actor struct {
	state State
}

// Producer returns a hollywood producer of an actor hydrated from a snapshot.
func Producer(s State) actor.Producer {
	return func() actor.Receiver { return &Actor{state: s} }
}

// Receive is only the switch: behaviour lives in Apply.
func (a *Actor) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case Request:
		m.Reply <- a.apply(m)
	case Get:
		m.Reply <- Response{CorrID: m.CorrID, Before: a.state, Result: Result{State: a.state}}
	case Restore:
		a.state = m.State
		m.Reply <- Response{CorrID: m.CorrID, Before: m.State, Result: Result{State: m.State}}
	}
}

// apply runs Apply with the panic contained, adopting the new state only on success.
func (a *Actor) apply(m Request) (resp Response) {
	resp = Response{CorrID: m.CorrID, Before: a.state}
	defer func() {
		if r := recover(); r != nil {
			resp.Result = Result{State: a.state}
			resp.Err = PanicError{Value: r}
		}
	}()
	res, err := Apply(a.state, m.Cmd)
	if err != nil {
		resp.Err = err
		resp.Result = Result{State: a.state}
		return resp
	}
	a.state = res.State
	resp.Result = res
	return resp
}
