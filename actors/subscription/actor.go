package subscription

import (
	"fmt"

	"github.com/anthdm/hollywood/actor"
)

// Request asks the actor to apply Cmd; the answer comes on Reply with CorrID (the
// engine's own correlation ids, not hollywood's).
type Request struct {
	CorrID uint64
	Cmd    any
	Reply  chan<- Response
}

// Response is the actor's answer: the state before and after.
type Response struct {
	CorrID uint64
	Before State
	After  State
	Err    error
}

// Corr is the correlation id.
func (r Response) Corr() uint64 { return r.CorrID }

// Restore puts back an earlier state (when a later step of the same command fails).
type Restore struct {
	CorrID uint64
	State  State
	Reply  chan<- Response
}

// PanicError is the result of a command whose Apply panicked; state is unchanged.
type PanicError struct{ Value any }

func (e PanicError) Error() string { return fmt.Sprintf("subscription: apply panicked: %v", e.Value) }

// Actor holds one subscription's state between commands.
type Actor struct{ state State }

// Producer returns a hollywood producer of an actor hydrated from a snapshot.
func Producer(s State) actor.Producer {
	return func() actor.Receiver { return &Actor{state: s} }
}

// Receive is only the switch: behaviour lives in Apply.
func (a *Actor) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case Request:
		m.Reply <- a.apply(m)
	case Restore:
		a.state = m.State
		m.Reply <- Response{CorrID: m.CorrID, Before: m.State, After: m.State}
	}
}

func (a *Actor) apply(m Request) (resp Response) {
	resp = Response{CorrID: m.CorrID, Before: a.state, After: a.state}
	defer func() {
		if r := recover(); r != nil {
			resp.After = a.state
			resp.Err = PanicError{Value: r}
		}
	}()
	n, err := Apply(a.state, m.Cmd)
	if err != nil {
		resp.Err = err
		return resp
	}
	a.state = n
	resp.After = n
	return resp
}
