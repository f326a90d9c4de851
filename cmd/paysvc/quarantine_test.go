package main

import (
	"encoding/json"
	"errors"
	"testing"

	"paysvc/storage"
	"paysvc/storage/storagetest"
)

// An operator sees what the engine set aside, newest first, filtered by merchant,
// with bytes the terminal and the table could not hold made printable.
func TestQuarantineList(t *testing.T) {
	s := storagetest.New(t)
	ctx := t.Context()
	exec(t, s.DB, `INSERT INTO partition_offsets (topic, partition, epoch, next_offset, owner) VALUES ('paysvc.commands.v1', 0, 1, 7, 'x')`)
	for i, m := range []string{"m_a", "m_b"} {
		if _, err := storage.QuarantineCommand(ctx, s.DB, storage.Quarantine{Topic: "paysvc.commands.v1", Partition: 0, Epoch: 1,
			Offset: int64(7 + i), CommandID: "cmd-" + m, MerchantID: m, Type: "invoice.stk_push", ErrorCode: "22P05",
			Error: "unsupported Unicode escape sequence \x00 (SQLSTATE 22P05)", Record: []byte("{\"email\":\"a\\u0000\"}\x00\xff"),
			Reply: []byte(`{"command_id":"cmd-` + m + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	// A worker that lost the partition cannot quarantine: its epoch is fenced.
	if _, err := storage.QuarantineCommand(ctx, s.DB, storage.Quarantine{Topic: "paysvc.commands.v1", Partition: 0, Epoch: 2,
		Offset: 9, CommandID: "late", MerchantID: "m_a", Type: "x", ErrorCode: "22P05", Error: "e", Record: []byte("r"),
		Reply: []byte(`{}`)}); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("quarantine at a stale epoch: %v, want ErrFenced", err)
	}
	if n := count(t, s.DB, `SELECT next_offset FROM partition_offsets`); n != 9 {
		t.Errorf("stored offset %d after two quarantines at 7 and 8, want 9", n)
	}
	r := runCLI(t, envFor(s), "quarantine", "list", "--merchant", "m_b")
	if r.err != nil {
		t.Fatal(r)
	}
	var out struct {
		Commands []storage.QuarantinedCommand `json:"commands"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err, r)
	}
	if len(out.Commands) != 1 || out.Commands[0].CommandID != "cmd-m_b" || out.Commands[0].Offset != 8 ||
		out.Commands[0].Error != `unsupported Unicode escape sequence \u0000 (SQLSTATE 22P05)` {
		t.Fatalf("quarantine list --merchant m_b = %+v", out.Commands)
	}
	if r := runCLI(t, envFor(s), "quarantine", "list"); r.err != nil || count(t, s.DB, `SELECT count(*) FROM processed_commands`) != 2 {
		t.Fatal(r)
	}
	wantUsage(t, runCLI(t, envFor(s), "quarantine"))
	wantUsage(t, runCLI(t, envFor(s), "quarantine", "list", "--limit", "0"))
}
