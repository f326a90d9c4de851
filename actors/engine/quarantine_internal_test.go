package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"testing"

	"github.com/lib/pq"

	"paysvc/actors/engine/aggregate"
	"paysvc/storage"
)

// Only failures that depend on a command's data are permanent: a quarantine of a
// command that would have succeeded on retry refuses a good request, so anything
// that can be the environment's fault is retried.
func TestPermanentFailures(t *testing.T) {
	_, jsonErr := json.Marshal(math.Inf(1))
	cases := []struct {
		err  error
		want bool
		code string
	}{
		{&pq.Error{Code: "22P05"}, true, "22P05"},                                  // NUL in jsonb
		{fmt.Errorf("batch: commit: %w", &pq.Error{Code: "22003"}), true, "22003"}, // numeric overflow, wrapped
		{&pq.Error{Code: "22021"}, true, "22021"},                                  // invalid byte sequence
		{&pq.Error{Code: "23505"}, true, "23505"},                                  // unique violation
		{&pq.Error{Code: "54000"}, true, "54000"},                                  // program limit
		{panicError{value: "boom"}, true, "panic"},
		{fmt.Errorf("apply: %w", aggregate.PanicError{Kind: "wallet", Value: "boom"}), true, "panic"},
		{jsonErr, true, "encode"},
		{&pq.Error{Code: "40001"}, false, ""}, // serialization failure
		{&pq.Error{Code: "40P01"}, false, ""}, // deadlock
		{&pq.Error{Code: "08006"}, false, ""}, // connection failure
		{&pq.Error{Code: "57P01"}, false, ""}, // admin shutdown
		{&pq.Error{Code: "53300"}, false, ""}, // too many connections
		{&pq.Error{Code: "42P01"}, false, ""}, // undefined table: a deploy in progress, not the command
		{storage.ErrFenced, false, ""},
		{storage.ErrStaleSnapshot, false, ""},
		{errActorTimeout, false, ""},
		{context.DeadlineExceeded, false, ""},
		{io.ErrUnexpectedEOF, false, ""},
	}
	for _, c := range cases {
		if got := permanent(c.err); got != c.want {
			t.Errorf("permanent(%v) = %v, want %v", c.err, got, c.want)
		}
		if c.want {
			if got := failureCode(c.err); got != c.code {
				t.Errorf("failureCode(%v) = %q, want %q", c.err, got, c.code)
			}
		}
	}
}

// The client of a quarantined command is told whose fault it is, in words that
// never show the database's.
func TestQuarantineReply(t *testing.T) {
	r := quarantineReply("c1", &pq.Error{Code: "22P05", Message: "unsupported Unicode escape sequence"})
	if r.Error == nil || r.Error.Code != CodeUnprocessable || r.CommandID != "c1" {
		t.Fatalf("data exception reply = %+v", r)
	}
	r = quarantineReply("c2", panicError{value: "index out of range"})
	if r.Error == nil || r.Error.Code != CodeCommandFailed {
		t.Fatalf("panic reply = %+v", r)
	}
	if got := failureText(&pq.Error{Code: "23505", Message: "duplicate key", Detail: "Key (email)=(secret@x.co) already exists."}); got != "duplicate key (SQLSTATE 23505)" {
		t.Errorf("failureText keeps %q; the Detail can quote customer data", got)
	}
}
