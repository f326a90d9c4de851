// Package retry hands a sandbox rail's result to its sink until the sink takes
// it. The M-Pesa and payout simulators stand in for a provider that calls back
// until it is answered, so both retry the same way: a doubling backoff with
// jitter, a panicking sink counted as one failed try, and an end when the
// simulator closes (its context).
package retry
