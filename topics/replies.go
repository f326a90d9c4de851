package topics

import (
	"encoding/json"
	"fmt"
)

// RepliesTopic carries command results to API instances outside the engine's
// process. The key is the instance id in Command.ReplyTo; every API instance reads
// the topic from its end and keeps only its own replies.
const RepliesTopic = "paysvc.replies.v1"

// Reply is the outcome of one command, stored in the batch transaction (so a
// redelivered command gets the same answer) and sent only after that commit.
type Reply struct {
	CommandID string          `json:"command_id"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *ReplyError     `json:"error,omitempty"`
}

// ReplyError is a domain refusal (insufficient funds, unknown wallet, ...). Code is a
// stable machine code the API maps to an HTTP status; Detail is safe to show.
type ReplyError struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
	Attr   string `json:"attr,omitempty"`
}

func (e *ReplyError) Error() string { return e.Code + ": " + e.Detail }

// EncodeReply marshals a reply.
func EncodeReply(r Reply) ([]byte, error) { return json.Marshal(r) }

// DecodeReply parses a reply record.
func DecodeReply(b []byte) (Reply, error) {
	var r Reply
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("decode reply: %w", err)
	}
	if r.CommandID == "" {
		return r, fmt.Errorf("decode reply: missing command_id")
	}
	return r, nil
}
