package payout

// Step is the file's transition as its actor hosts it (actors/engine/aggregate): the new
// state, and its Delta as what it says of the change.
func Step(s State, cmd any) (State, any, error) {
	n, d, err := Apply(s, cmd)
	if err != nil {
		return s, nil, err
	}
	return n, d, nil
}
