package payout

import "testing"

// The exhaustive walks in transitions_test.go only know the statuses they list: a
// status added to a table without being added there would go unwalked.
func TestTransitionTables_OnlyKnownStatuses(t *testing.T) {
	t.Parallel()
	check := func(name string, m map[string][]string, known ...string) {
		isKnown := map[string]bool{}
		for _, s := range known {
			isKnown[s] = true
		}
		for from, tos := range m {
			if !isKnown[from] {
				t.Errorf("%s: unknown status %q", name, from)
			}
			for _, to := range tos {
				if !isKnown[to] {
					t.Errorf("%s: %q -> unknown status %q", name, from, to)
				}
			}
		}
		for _, s := range known {
			if _, ok := m[s]; !ok && s != "" {
				t.Errorf("%s: status %q has no row", name, s)
			}
		}
	}
	check("fileTransitions", fileTransitions, "", StatusPreview, StatusProcessing, StatusComplete, StatusCancelled, StatusFailed)
	check("txnTransitions", txnTransitions, TxnPending, TxnProcessing, TxnComplete, TxnFailed)
}
