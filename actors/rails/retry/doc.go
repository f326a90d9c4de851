// Package retry is what the sandbox rails' simulators share: a Pool that runs
// each request they accept on its own goroutine, bounded and stopped by Close,
// and Deliver, which hands a result to the simulator's sink until the sink takes
// it. The M-Pesa and payout simulators stand in for a provider that calls back
// until it is answered, so both retry the same way: a doubling backoff with
// jitter, a panicking sink counted as one failed try, and an end when the
// simulator closes.
package retry
