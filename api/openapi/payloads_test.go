package openapi

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"paysvc/actors/outbound/webhooks"
)

var update = flag.Bool("update", false, "copy docs/events/<topic>.schema.json to payloads/ for every webhook topic")

// TestPayloadCopies: payloads/ holds, byte for byte, docs/events' payload schema
// of every topic a webhook can subscribe to, and nothing else. docs/events is the
// source (topics' tests generate it from the Go types); these are its embedded
// copies, rewritten with -update.
func TestPayloadCopies(t *testing.T) {
	want := map[string]bool{}
	for _, topic := range webhooks.Topics {
		want[filepath.Base(PayloadFile(topic))] = true
		source, err := os.ReadFile(filepath.Join("..", "..", "docs", "events", topic+".schema.json"))
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(PayloadFile(topic), source, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		embedded, err := payloadFiles.ReadFile(PayloadFile(topic))
		if err != nil || !bytes.Equal(embedded, source) {
			t.Errorf("api/openapi/%s is not docs/events/%s.schema.json (%v): run go test ./api/openapi -run TestPayloadCopies -update",
				PayloadFile(topic), topic, err)
		}
	}
	files, _ := filepath.Glob("payloads/*.schema.json")
	for _, f := range files {
		if !want[filepath.Base(f)] {
			t.Errorf("api/openapi/%s is the schema of no webhook topic", f)
		}
	}
}
