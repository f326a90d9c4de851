// Package payout is the sandbox payout rail: it pays out the transactions of a
// payment file (send money) the way the real providers answer, asynchronously, and
// it holds what the API needs to check a recipient before money moves.
//
// It exists because a payout leaves paysvc through a provider that answers later:
// the engine queues one PayoutRailRequest per chunk of a file (at most
// topics.PayoutChunk transactions) on topics.RailsPayoutTopic, the rails role hands
// it to Simulator.Submit, and the outcomes come back through a Sink as
// topics.PayoutResults, which the rails role produces as payout.results commands.
// The sandbox simulates the providers a file can name:
//
//	MPESA-B2C  M-Pesa business to customer: a phone number (2547XXXXXXXX, 2541XXXXXXXX)
//	MPESA-B2B  M-Pesa business to business: a PayBill or till number (account_type)
//	PESALINK   instant bank transfer: a bank code (Banks) and an account number
//	RTGS       real-time gross settlement bank transfer: as PESALINK
//	AIRTIME    airtime top-up: a phone number, at most KES 10,000 per transaction
//
// P2P (INTASEND, wallet to wallet) is not a rail: the engine credits the
// recipient's wallet itself (payout.p2p_credit), so nothing here simulates or
// validates it; the API checks the destination wallet.
//
// What it guarantees: Submit returns at once (or waits for a free slot, bounded by
// its ctx) and never blocks a consumer loop on a provider; every accepted request
// produces a SUBMITTED result for all its transactions, then FINAL results grouped
// in batches whose labels depend on the request only ("c<chunk>", and
// "c<chunk>-late" for the transactions the provider answers late), and whose
// provider references are derived from the file and the transaction, so a
// redelivered request yields the same results and the same command ids. Sink
// failures are retried with backoff until the sink takes the result or Close.
//
// The outcome of a transaction is chosen by the last four characters of its
// account (the same for every provider, see the Suffix constants):
//
//	0011  FAILED: "Invalid recipient account" (Validate also answers INVALID_ACCOUNT)
//	0012  FAILED: "Transaction limit exceeded for the recipient"
//	0013  FAILED: "Provider unavailable: <provider> did not accept the transaction"
//	0014  COMPLETE, but late: in the batch "c<chunk>-late", after 3*Delay
//
// Any other account succeeds. AIRTIME amounts above 10000 fail ("Airtime amount
// above the provider limit") whatever the account.
//
// Validate and ValidAccount are synchronous: Validate answers
// POST /api/v1/send-money/validate-account/ with the registered name of an
// account, ValidAccount is the format check the API applies to every transaction
// of a file at initiation. Banks is the Kenyan bank code list the API serves.
package payout
