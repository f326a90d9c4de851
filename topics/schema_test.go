package topics_test

// The JSON Schemas in docs/events/ are generated from the Go types of this package
// by reflection; TestSchemas fails when the committed files drift from the types.
// Refresh them (and the golden files in testdata/) with:
//
//	go test ./topics -update

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"paysvc/actors/aggregates/refund"
	"paysvc/actors/values/money"
	"paysvc/topics"
)

var update = flag.Bool("update", false, "rewrite docs/events/*.schema.json and testdata/*.golden.json")

const schemaDir = "../docs/events"

// schemaFiles are the committed schemas and the type each one documents.
var schemaFiles = []struct {
	file string
	v    any
}{
	{"event.schema.json", topics.Event{}},
	{"wallet_transfer_event.schema.json", topics.WalletTransfer{}},
	{"command.schema.json", topics.Command{}},
	{"wallet_create.schema.json", topics.WalletCreate{}},
	{"wallet_deposit.schema.json", topics.WalletDeposit{}},
	{"wallet_transfer_command.schema.json", topics.WalletTransferCmd{}},
	{"reply.schema.json", topics.Reply{}},
	{"collection_event.schema.json", topics.Collection{}},
	{"send_money_event.schema.json", topics.SendMoney{}},
	{"payout_initiate_command.schema.json", topics.PayoutInitiate{}},
	{"payout_results_command.schema.json", topics.PayoutResults{}},
	{"payout_operator_command.schema.json", topics.PayoutOperator{}},
	{"payout_rail_request.schema.json", topics.PayoutRailRequest{}},
	{"payout_callback.schema.json", topics.Callback{}},
	{"reversal_event.schema.json", refund.Reversal{}},
	{"refund_create_command.schema.json", refund.Create{}},
	{"refund_cancel_command.schema.json", refund.Cancel{}},
	{"refund_take_command.schema.json", refund.Take{}},
	{"refund_settle_command.schema.json", refund.Settle{}},
	{"subscription_event.schema.json", topics.Subscription{}},
	{"subscription_cycle_command.schema.json", topics.SubscriptionCycle{}},
}

func TestSchemas(t *testing.T) {
	docs := typeDocs(t)
	for _, s := range schemaFiles {
		t.Run(s.file, func(t *testing.T) {
			typ := reflect.TypeOf(s.v)
			schema := schemaOf(t, typ)
			schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
			schema["title"] = typ.String()
			schema["description"] = docs[typ.Name()]
			got := marshalFile(t, schema)
			checkFile(t, filepath.Join(schemaDir, s.file), got, "TestSchemas")
		})
	}
}

// TestGolden_WalletTransferEvent pins the exact bytes of a wallet_transfer_event
// record value, and checks the sample against the committed schemas.
func TestGolden_WalletTransferEvent(t *testing.T) {
	at := time.Date(2026, 3, 14, 9, 26, 53, 589793238, time.UTC)
	payload, err := json.Marshal(topics.WalletTransfer{
		ID: "JLNVHPUVPG", FromCurrency: "KES", ToCurrency: "KES", AmountSent: "10.00", AmountReceived: "10.00",
		ExchangeRate: "1.00", Status: "COMPLETE", OriginWallet: "T5X3N6F39K", DestinationWallet: "45MX2QFHVF",
		Narrative: "sdk transfer", CreatedAt: at,
	})
	if err != nil {
		t.Fatal(err)
	}
	ev := topics.Event{
		ID: "0c6f1d7e-3b0a-5d2c-9a44-8f1e2b7c6d5a", Type: topics.WalletTransferEvent, Version: 1,
		OccurredAt: at.Add(1500 * time.Microsecond), MerchantID: "MCH8K2Q4ZT", Key: "T5X3N6F39K", Payload: payload,
	}
	wire, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	// The file is the wire bytes indented for review; compacting it must give them back.
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, wire, "", "  "); err != nil {
		t.Fatal(err)
	}
	pretty.WriteByte('\n')
	path := filepath.Join("testdata", "wallet_transfer_event.golden.json")
	checkFile(t, path, pretty.Bytes(), "TestGolden")
	var compact bytes.Buffer
	if err := json.Compact(&compact, pretty.Bytes()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(compact.Bytes(), wire) {
		t.Fatalf("compacted golden differs from the wire bytes:\n%s\n%s", compact.Bytes(), wire)
	}

	var back topics.Event
	if err := json.Unmarshal(wire, &back); err != nil {
		t.Fatal(err)
	}
	if !back.OccurredAt.Equal(ev.OccurredAt) || string(back.Payload) != string(ev.Payload) || back.ID != ev.ID || back.Key != ev.Key {
		t.Errorf("round trip changed the event: %+v", back)
	}

	var doc map[string]any
	if err := json.Unmarshal(wire, &doc); err != nil {
		t.Fatal(err)
	}
	conforms(t, "event", "event.schema.json", doc)
	conforms(t, "payload", "wallet_transfer_event.schema.json", doc["payload"])
}

var (
	timeType  = reflect.TypeFor[time.Time]()
	rawType   = reflect.TypeFor[json.RawMessage]()
	moneyType = reflect.TypeFor[money.Amount]()
)

// schemaOf maps a Go type to JSON Schema the way encoding/json encodes it.
func schemaOf(t *testing.T, typ reflect.Type) map[string]any {
	switch typ {
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case moneyType:
		return map[string]any{"type": "string", "pattern": `^-?[0-9]+\.[0-9]{2}$`,
			"description": "Decimal amount with exactly two places, as a string."}
	case rawType:
		return map[string]any{"description": "Any JSON value, embedded verbatim; its schema depends on the record type."}
	}
	switch typ.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Slice:
		// A nil slice encodes as null; the types here always send arrays.
		return map[string]any{"type": "array", "items": schemaOf(t, typ.Elem())}
	case reflect.Pointer:
		s := schemaOf(t, typ.Elem())
		if tp, ok := s["type"].(string); ok {
			s["type"] = []string{tp, "null"}
		}
		return s
	case reflect.Struct:
		props := map[string]any{}
		required := []string{}
		for f := range typ.Fields() {
			if !f.IsExported() {
				continue
			}
			if f.Anonymous {
				t.Fatalf("%s.%s: embedded fields are not supported by the schema generator", typ, f.Name)
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" && opts == "" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			props[name] = schemaOf(t, f.Type)
			if !strings.Contains(","+opts+",", ",omitempty,") && !strings.Contains(","+opts+",", ",omitzero,") {
				required = append(required, name)
			}
		}
		return map[string]any{"type": "object", "properties": props, "required": required}
	}
	t.Fatalf("schema generator: no mapping for %s (kind %s); add one to schemaOf", typ, typ.Kind())
	return nil
}

// typeDocs reads the doc comment of every type in the package, for descriptions.
func typeDocs(t *testing.T) map[string]string {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	pkg, err := doc.NewFromFiles(fset, files, "paysvc/topics")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, typ := range pkg.Types {
		out[typ.Name] = strings.Join(strings.Fields(typ.Doc), " ")
	}
	return out
}

func marshalFile(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// checkFile compares got with the committed file, or rewrites it under -update.
func checkFile(t *testing.T, path string, got []byte, test string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v\nrun: go test ./topics -run %s -update", err, test)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is out of date with the Go types:\n%s\nrun: go test ./topics -run %s -update (and review the diff)",
			path, firstDiff(want, got), test)
	}
}

// firstDiff shows the first line where two files differ, with a little context.
func firstDiff(want, got []byte) string {
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			from := max(i-2, 0)
			return fmt.Sprintf("first difference at line %d:\n  context:   %s\n  committed: %q\n  generated: %q",
				i+1, strings.Join(g[from:i], "\n             "), wl, gl)
		}
	}
	return "files differ only in length"
}

func loadSchema(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(schemaDir, file))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return s
}

// conforms validates v against a committed schema file with a real JSON Schema
// validator (santhosh-tekuri/jsonschema, draft 2020-12, formats asserted: every
// keyword, pattern and enum included), and, stricter than the schema, checks that
// every field of the sample is documented.
func conforms(t *testing.T, at, file string, v any) {
	t.Helper()
	if err := validate(file, nil, v); err != nil {
		t.Errorf("%s does not validate against docs/events/%s: %v", at, file, err)
	}
	documented(t, at, loadSchema(t, file), v)
}

// validate compiles docs/events/file (with edit applied to its JSON first, when
// given) and validates v against it.
func validate(file string, edit func(map[string]any), v any) error {
	b, err := os.ReadFile(filepath.Join(schemaDir, file))
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	if edit != nil {
		edit(doc.(map[string]any))
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(file, doc); err != nil {
		return err
	}
	sch, err := c.Compile(file)
	if err != nil {
		return err
	}
	// Round trip through JSON so numbers are what a decoder of the wire sees.
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// documented fails for any field of v, at any depth, that the schema does not
// name (the schemas allow additional properties for compatibility, but what is
// on the wire today must all be in docs/events).
func documented(t *testing.T, at string, schema map[string]any, v any) {
	t.Helper()
	if schema["type"] == nil {
		return // any value (an embedded payload has a schema of its own)
	}
	switch x := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		for k, fv := range x {
			ps, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("%s: field %q is not in the schema", at, k)
				continue
			}
			documented(t, at+"."+k, ps, fv)
		}
	case []any:
		items, _ := schema["items"].(map[string]any)
		for i, e := range x {
			documented(t, fmt.Sprintf("%s[%d]", at, i), items, e)
		}
	}
}

// TestSchemasRefuseBadValues shows the check above is a validator and not a
// type walk: an amount that breaks the money pattern, a bad date-time and a
// missing required field fail against the committed schemas, and so does a value
// outside an enum (the committed schemas name no enum yet; the test adds one to
// event.schema.json's type, as a schema that listed its record types would).
func TestSchemasRefuseBadValues(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "wallet_transfer_event.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	sample := func() map[string]any {
		var doc map[string]any
		if err := json.Unmarshal(golden, &doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	onlyTransfers := func(s map[string]any) {
		s["properties"].(map[string]any)["type"].(map[string]any)["enum"] = []any{topics.WalletTransferEvent}
	}
	deposit := func() map[string]any {
		raw, err := json.Marshal(topics.WalletDeposit{WalletID: "T5X3N6F39K", Amount: money.MustParse("10.00"), Narrative: "top up"})
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	event := sample
	transfer := func() map[string]any { return sample()["payload"].(map[string]any) }
	cases := []struct {
		name, file string
		sample     func() map[string]any
		edit       func(map[string]any)
		mutate     func(map[string]any)
	}{
		{"amount with one decimal place (pattern)", "wallet_deposit.schema.json", deposit, nil,
			func(d map[string]any) { d["amount"] = "10.5" }},
		{"amount as a number (type)", "wallet_deposit.schema.json", deposit, nil,
			func(d map[string]any) { d["amount"] = 10.5 }},
		{"created_at not a date-time (format)", "wallet_transfer_event.schema.json", transfer, nil,
			func(p map[string]any) { p["created_at"] = "yesterday" }},
		{"status missing (required)", "wallet_transfer_event.schema.json", transfer, nil,
			func(p map[string]any) { delete(p, "status") }},
		{"type outside its enum", "event.schema.json", event, onlyTransfers,
			func(e map[string]any) { e["type"] = "wallet_transfer_evnt" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := c.sample()
			// The unchanged sample passes, so the refusal below is the change's.
			if err := validate(c.file, c.edit, doc); err != nil {
				t.Fatalf("the sample fails before the change: %v", err)
			}
			c.mutate(doc)
			if err := validate(c.file, c.edit, doc); err == nil {
				t.Errorf("validated; want a refusal")
			}
		})
	}
}
