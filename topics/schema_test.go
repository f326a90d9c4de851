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
	conforms(t, "event", loadSchema(t, "event.schema.json"), doc)
	conforms(t, "payload", loadSchema(t, "wallet_transfer_event.schema.json"), doc["payload"])
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

// conforms checks v against the subset of JSON Schema the generator emits, and,
// stricter than the schema, that every field of the sample is documented.
func conforms(t *testing.T, at string, schema map[string]any, v any) {
	t.Helper()
	types := map[string]bool{}
	switch tp := schema["type"].(type) {
	case string:
		types[tp] = true
	case []any:
		for _, x := range tp {
			types[x.(string)] = true
		}
	case nil:
		return // any value
	}
	var got string
	switch x := v.(type) {
	case nil:
		got = "null"
	case string:
		got = "string"
		if schema["format"] == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, x); err != nil {
				t.Errorf("%s: %q is not a date-time", at, x)
			}
		}
	case bool:
		got = "boolean"
	case float64:
		got = "number"
		if x == float64(int64(x)) {
			got = "integer"
		}
	case []any:
		got = "array"
	case map[string]any:
		got = "object"
		props, _ := schema["properties"].(map[string]any)
		for _, r := range schema["required"].([]any) {
			if _, ok := x[r.(string)]; !ok {
				t.Errorf("%s: required field %q missing", at, r)
			}
		}
		for k, fv := range x {
			ps, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("%s: field %q is not in the schema", at, k)
				continue
			}
			conforms(t, at+"."+k, ps, fv)
		}
	}
	if !types[got] && !(got == "integer" && types["number"]) {
		t.Errorf("%s: %s where the schema wants %v", at, got, schema["type"])
	}
}
