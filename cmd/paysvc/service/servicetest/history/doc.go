// Package history records what clients of paysvc saw while processes and Kafka
// brokers were killed under load, and checks that every such history could have
// come from one copy of the wallets applying one operation at a time
// (linearizability), with github.com/anishathalye/porcupine.
//
// Fault tests cannot assert exact balances: when a request times out or its
// process dies, nobody knows whether it took effect. What they can assert is that
// every answer the clients did get is explained by some order of the operations
// that agrees with real time. A test records each client operation with a
// Recorder (Begin right before sending, then Ok, Refused, Balance or Unknown
// right after the answer) and calls Check at the end; a failure names the
// shortest sub-history that is still impossible, so the bug can be read off a few
// lines instead of thousands.
//
// It is test-support code that several test packages import, so it is an
// ordinary package rather than a _test file.
//
// # The model
//
// The sequential model is a set of wallets holding int64 cents (callers convert
// money.Amount with Cents; nothing here is floating point), each starting at the
// balance set with Recorder.Initial, or 0:
//   - Deposit{Wallet, Cents} adds Cents. Acknowledged (Ok), it happened; Refused
//     (a definite 4xx), it did not.
//   - Transfer{From, To, Cents} moves Cents when From holds at least Cents, and
//     otherwise does nothing, so it must be acknowledged exactly when From holds
//     enough at its linearization point and refused exactly when it does not. A
//     transfer from a wallet to itself never changes a balance, and either answer
//     is accepted for it: the service may reject it as invalid or apply it as a
//     no-op.
//   - Read{Wallet} returns the balance.
//
// # Unknown outcomes
//
// An operation that ended with Unknown (the client gave up) or had not ended
// when Check ran returns at "infinity" (math.MaxInt64): it may take effect at
// any moment after its call, or never, and the model accepts any outcome for
// it. Unknown reads constrain nothing and are left out of the check.
//
// An unknown write is not searched for by porcupine (which would try every
// later linearization point, and must exhaust them all to prove a history
// illegal). Instead the model's state holds the unknown writes that have not
// taken effect yet, and an observation (a read, or a transfer's answer, which
// depends on From's balance) that no state explains lets the pending writes it
// needs take effect just before it. porcupine then gets the interval [call,
// call] for the write: joining the pending writes at its call already allows
// everything a later point would. The accepted histories are exactly those of
// "takes effect at some point after its call, or never", which
// TestAgreesWithExhaustiveSearch checks against brute force. What this still
// cannot make cheap is ambiguity: every pending write that never happened can
// still happen at each later observation, so many pending writes on the same
// wallets (and sums of amounts that coincide) multiply the states. The search
// per observation is bounded; a run that reaches the bound, or the timeout, is
// reported as undecided, never as a pass or a failure. Fault tests keep
// unknown writes to those really cut off by a fault, spread load over several
// wallets, and prefer distinct amounts.
//
// An operation retried by the client must be recorded as one operation only if
// the service is meant to apply it once (an idempotency key); two recorded
// operations are two effects.
//
// # Partitions
//
// Wallets joined by any recorded transfer form one partition (connected
// components); operations on disjoint sets of wallets cannot constrain each
// other, and linearizability is local (a history is linearizable exactly when
// each independent object's sub-history is), so each partition is checked on its
// own and in parallel. Two merchants whose wallets never exchange money are two
// partitions without the caller saying so.
//
// # What a failure says
//
// The error names the first answer that no order of the operations before it
// explains, and the shortest bad history found: the shortest failing prefix
// (binary search over cut times; an operation answered after the cut counts as
// unknown there), then reduced by moves that keep every linearizable history
// linearizable (see shrink.go), so that what is printed fails only if the
// recorded history does. Under steady concurrency few writes can be removed
// that way, and a long reduced history is printed with its middle elided; the
// HTML visualization written next to it has the whole partition.
package history
