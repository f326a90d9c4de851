package topics

import (
	"encoding/json"
	"fmt"
	"time"
)

// CommandsTopic carries every state-changing request, keyed by merchant id.
const CommandsTopic = "paysvc.commands.v1"

// Command is the envelope of one write. ID is chosen by the API (derived from the
// Idempotency-Key when one is given), so a re-produced command is recognised and
// applied once.
type Command struct {
	ID         string    `json:"id"`
	Type       string    `json:"type"`
	Version    int       `json:"version"`
	MerchantID string    `json:"merchant_id"`
	ReplyTo    string    `json:"reply_to,omitempty"`
	IssuedAt   time.Time `json:"issued_at"`
	// FreshID says the producer minted ID for this command alone (a random UUID, as
	// the API does for a request without an Idempotency-Key), so no other command
	// can carry it, and the engine does not look it up among the processed ones:
	// the same record is never applied twice (the offset is committed with its
	// effects), and processed_commands' primary key refuses any other record under
	// the id. A command whose id is derived from anything (an Idempotency-Key, a
	// provider's reference) must leave it false.
	FreshID bool `json:"fresh_id,omitempty"`
	// Environment is the environment of the process that produced the command
	// (Sandbox or Live: its PAYSVC_ENVIRONMENT). Sandbox and live processes may
	// share one command log, so the engine refuses a command whose environment is
	// not its merchant's, and one that names none (docs/security.md, "Guards of
	// the money-moving commands").
	Environment string `json:"environment,omitempty"`
	// Simulated says the command carries an outcome that a sandbox simulator made
	// up (a rail's answer, a card approval). The engine refuses it for a live
	// merchant, whatever process produced it.
	Simulated bool            `json:"simulated,omitempty"`
	Payload   json.RawMessage `json:"payload"`
}

// The environments a merchant, a process and a command belong to.
const (
	Sandbox = "sandbox"
	Live    = "live"
)

// CommandKey is the record key: the merchant, so a merchant's commands are ordered
// and owned by one worker.
func CommandKey(merchantID string) []byte { return []byte(merchantID) }

// EncodeCommand marshals a command; the error is only possible for a payload that is
// not valid JSON, which is a programming error of the caller.
func EncodeCommand(c Command) ([]byte, error) {
	if c.Version == 0 {
		c.Version = 1
	}
	return json.Marshal(c)
}

// EncodeCommandValue is EncodeCommand with the payload given as a value (c.Payload
// is ignored): the payload is encoded once, inside the envelope, instead of being
// encoded and then validated and compacted again as a json.RawMessage. The bytes
// are EncodeCommand's for the payload's json.Marshal (TestEncodeCommandValue).
func EncodeCommandValue(c Command, payload any) ([]byte, error) {
	if c.Version == 0 {
		c.Version = 1
	}
	// The outer Payload hides the embedded one (encoding/json's rule for a field
	// at a shallower depth), and the fields keep Command's order.
	return json.Marshal(struct {
		Command
		Payload any `json:"payload"`
	}{c, payload})
}

// DecodeCommand parses a command record and rejects envelopes without the fields
// the engine needs to route and deduplicate them.
func DecodeCommand(b []byte) (Command, error) {
	var c Command
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("decode command: %w", err)
	}
	if c.ID == "" || c.Type == "" || c.MerchantID == "" {
		return c, fmt.Errorf("decode command: missing id, type or merchant_id")
	}
	return c, nil
}
