package subscription

import "fmt"

// Given is a command with the principal that gives it: the message a
// subscription's actor takes (actors/engine/aggregate).
type Given struct {
	By  Principal
	Cmd any
}

// Step is the subscription's transition as its actor hosts it: ApplyBy of the
// given command. A refusal (ErrDuplicate and ErrStale included: a repeated or
// overtaken command changes nothing) leaves the state as it was.
func Step(s State, msg any) (State, any, error) {
	g, ok := msg.(Given)
	if !ok {
		return s, nil, fmt.Errorf("%w: unknown message %T", ErrInvalid, msg)
	}
	n, err := ApplyBy(s, g.By, g.Cmd)
	if err != nil {
		return s, nil, err
	}
	return n, nil, nil
}
