package invoice

// Step is the invoice's transition as its actor hosts it (actors/engine/aggregate).
func Step(s State, cmd any) (State, any, error) {
	n, err := Apply(s, cmd)
	if err != nil {
		return s, nil, err
	}
	return n, nil, nil
}
