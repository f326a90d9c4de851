package engine_test

import (
	"strings"
	"testing"

	"paysvc/actors/engine"
	"paysvc/cmd/paysvc/service"
)

// An engine's kinds are a value it is given (Config.Kinds), checked when it is
// made: a list that names a kind twice, claims a command type twice or holds an
// incomplete kind is refused, and nothing else has to be reset for the next one.
func TestNewRefusesABadKindsList(t *testing.T) {
	t.Parallel()
	kinds := service.Kinds(service.Aggregates(nil, nil))
	incomplete := kinds[0]
	incomplete.Apply = nil
	renamed := kinds[1]
	renamed.Name = "invoice_copy"
	for name, tc := range map[string]struct {
		kinds []engine.Kind
		want  string
	}{
		"twice":      {append(service.Kinds(service.Aggregates(nil, nil)), kinds[0]), "listed twice"},
		"command":    {append(service.Kinds(service.Aggregates(nil, nil)), renamed), "already handled"},
		"incomplete": {[]engine.Kind{incomplete}, "incomplete"},
	} {
		if _, err := engine.New(engine.Config{Kinds: tc.kinds, Logger: logger()}, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want an error saying %q", name, err, tc.want)
		}
	}
}
