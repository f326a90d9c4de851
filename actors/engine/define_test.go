package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/engine"
	"paysvc/topics"
)

// note is a test aggregate with two commands that share one payload type, as the
// payout's hold, release and fail do.
type note struct{ ID string }

type noteMsg struct{ A, B string }

type notes struct{}

func (notes) Name() string { return "testnote" }
func (notes) Load(context.Context, sqlx.QueryerContext, string, []string) ([]engine.Stored[note], error) {
	return nil, nil
}

func answer(s string) func(*engine.Tx, *topics.Command, *noteMsg) (topics.Reply, error) {
	return func(*engine.Tx, *topics.Command, *noteMsg) (topics.Reply, error) {
		return topics.Reply{Result: []byte(`"` + s + `"`)}, nil
	}
}

// Define finds each command's own parts by its type, also where two commands share
// a payload type; a payload of another type is refused, never asserted.
func TestDefineByCommandType(t *testing.T) {
	t.Parallel()
	k := engine.Define[note](notes{},
		engine.On[note]("note.a", engine.Guard{}, func(p *noteMsg) []string { return []string{p.A} }, answer("a")),
		engine.On[note]("note.b", engine.Guard{WhileDisabled: true}, func(p *noteMsg) []string { return []string{p.B} }, answer("b"),
			engine.Needs(func(p *noteMsg) []engine.Ref { return []engine.Ref{{Kind: "other", ID: p.A}} })),
	)
	p := &noteMsg{A: "1", B: "2"}
	if got := k.IDs("note.a", p); len(got) != 1 || got[0] != "1" {
		t.Errorf("note.a ids %v", got)
	}
	if got := k.IDs("note.b", p); len(got) != 1 || got[0] != "2" {
		t.Errorf("note.b ids %v", got)
	}
	if got := k.Needs("note.a", p); got != nil {
		t.Errorf("note.a has no needs, got %v", got)
	}
	if got := k.Needs("note.b", p); len(got) != 1 || got[0].ID != "1" {
		t.Errorf("note.b needs %v", got)
	}
	if !k.Guards["note.b"].WhileDisabled || k.Guards["note.a"].WhileDisabled {
		t.Errorf("guards %+v", k.Guards)
	}
	if k.Prepare != nil || k.Creates != nil || k.Actor != nil || k.Rows != nil {
		t.Error("parts no command or method gives are set")
	}
	if got := k.IDs("note.a", &note{}); got != nil {
		t.Errorf("a payload of another type gave ids %v", got)
	}
	for typ, want := range map[string]string{"note.a": `"a"`, "note.b": `"b"`} {
		r, err := k.Apply(nil, &topics.Command{Type: typ}, k.Commands[typ]())
		if err != nil || string(r.Result) != want {
			t.Errorf("%s: %s %v", typ, r.Result, err)
		}
	}
	r, err := k.Apply(nil, &topics.Command{Type: "note.a"}, nil) // undecodable
	if err != nil || r.Error == nil || r.Error.Code != engine.CodeInvalid {
		t.Errorf("an undecodable payload: %+v %v", r, err)
	}
}

// What types cannot say panics when the aggregate is defined: a command listed
// twice, ids opened by an aggregate that cannot say which are taken.
func TestDefineRefusesWhatTypesCannotSay(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]func(){
		"twice": func() {
			engine.Define[note](notes{}, engine.On[note]("note.a", engine.Guard{}, func(*noteMsg) []string { return nil }, answer("a")),
				engine.On[note]("note.a", engine.Guard{}, func(*noteMsg) []string { return nil }, answer("a")))
		},
		"creates without Claiming": func() {
			engine.Define[note](notes{}, engine.On[note]("note.a", engine.Guard{}, func(*noteMsg) []string { return nil }, answer("a"),
				engine.Creates(func(p *noteMsg) []string { return []string{p.A} })))
		},
	} {
		func() {
			defer func() {
				if v := recover(); v == nil || !strings.Contains(v.(string), "testnote") {
					t.Errorf("%s: Define did not panic naming the aggregate (%v)", name, v)
				}
			}()
			f()
		}()
	}
}
