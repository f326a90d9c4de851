package service

import (
	"slices"
	"strings"
)

// toolVariables are the PAYSVC_ names read outside FromEnv: by the CLI's client
// commands, the Makefile and ops scripts, and the bench. A name with one of
// toolPrefixes belongs to the tests.
var toolVariables = []string{
	"PAYSVC_SECRET_KEY", // paysvc listen / replay
	"PAYSVC_BIN", "PAYSVC_PG_BIN", "PAYSVC_KAFKA_PORT_BASE", "PAYSVC_KAFKA_HEAP", "PAYSVC_KAFKA_LIB_DIR",
	"PAYSVC_KAFKA_NODES", "PAYSVC_KAFKA_START_TIMEOUT", "PAYSVC_OPENAPI_DUMP",
}

var toolPrefixes = []string{"PAYSVC_TEST_", "PAYSVC_FUZZ_", "PAYSVC_LEDGER_AUDIT_BENCH_"}

// KnownVariables is every PAYSVC_ variable paysvc reads: what FromEnv asks for
// (found by running it over an empty environment, so the list cannot drift from
// the code) and the tools' own.
func KnownVariables() []string {
	seen := map[string]bool{}
	_, _ = FromEnv(func(k string) string {
		if strings.HasPrefix(k, "PAYSVC_") {
			seen[k] = true
		}
		return ""
	})
	for _, k := range toolVariables {
		seen[k] = true
	}
	// Every read also asks for NAME_FILE; those are not names of their own
	// (PAYSVC_WEBHOOK_CA_FILE, a path by its nature, is).
	for k := range seen {
		if base, ok := strings.CutSuffix(k, "_FILE"); ok && seen[base] {
			delete(seen, k)
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Unknown is a PAYSVC_ variable of the environment that nothing reads, with the
// known name closest to it when one is close enough to be a misspelling.
type Unknown struct {
	Name, DidYouMean string
}

// UnknownVariables lists environ's PAYSVC_ variables that paysvc does not read
// (a misspelt PAYSVC_KAFKA_SYNC_WRITE would otherwise be ignored in silence).
// NAME_FILE counts as NAME.
func UnknownVariables(environ []string) []Unknown {
	known := KnownVariables()
	var out []Unknown
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "PAYSVC_") || slices.ContainsFunc(toolPrefixes, func(p string) bool { return strings.HasPrefix(k, p) }) {
			continue
		}
		if isKnown(known, k) {
			continue
		}
		out = append(out, Unknown{Name: k, DidYouMean: closest(strings.TrimSuffix(k, "_FILE"), known)})
	}
	return out
}

// isKnown: k is a known name, or the NAME_FILE form of one.
func isKnown(known []string, k string) bool {
	_, found := slices.BinarySearch(known, k)
	if base, ok := strings.CutSuffix(k, "_FILE"); ok && !found {
		_, found = slices.BinarySearch(known, base)
	}
	return found
}

// closest is the known name at the smallest edit distance from k, if that
// distance is small for its length (at most 3, and under a third of it).
func closest(k string, known []string) string {
	best, bestD := "", len(k)
	for _, c := range known {
		if d := editDistance(k, c); d < bestD {
			best, bestD = c, d
		}
	}
	if bestD > 3 || 3*bestD >= len(strings.TrimPrefix(k, "PAYSVC_")) {
		return ""
	}
	return best
}

// editDistance is Levenshtein's distance between two ASCII names.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
