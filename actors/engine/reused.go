package engine

import "paysvc/topics"

// CodeIdempotencyKeyReused refuses a command whose id was already applied as a
// command of another type: the same id on another operation (an Idempotency-Key
// reused elsewhere) must not be answered with the first operation's reply, which
// would report success for something that never happened.
const CodeIdempotencyKeyReused = "idempotency_key_reused"

func reusedReply(commandID string) topics.Reply {
	return topics.Reply{CommandID: commandID, Error: &topics.ReplyError{Code: CodeIdempotencyKeyReused,
		Detail: "This Idempotency-Key was already used for a different operation. Send a new Idempotency-Key for a new request."}}
}
