package storage

// Owned names aggregates together with their merchants: Merchants[i] owns IDs[i].
// The engine's hydration reads take one, so that every id is read only with the
// merchant its command came from.
type Owned struct {
	Merchants []string
	IDs       []string
}

// Add names one more aggregate.
func (o *Owned) Add(merchantID, id string) {
	o.Merchants = append(o.Merchants, merchantID)
	o.IDs = append(o.IDs, id)
}
