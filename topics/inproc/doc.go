// Package inproc connects the service's own Kafka clients to the embedded broker
// (kfake) of the same process without a socket.
//
// In the default single binary (docs/design.md, "Roles") every command crosses the broker
// twice, the API producing it and the engine fetching it, and every event twice
// more (the relay, the dispatcher). Over loopback TCP each crossing is a write and
// a read system call on both sides plus a netpoller wake-up, and on the 2-core VM
// of docs/benchmarks-history.md the Kafka hops were a fifth of the service's CPU. Here a
// client of this process dials an in-memory pipe instead; the broker still speaks
// the real Kafka protocol over it (the same requests, the same bytes), and it keeps
// its TCP port for every other client (kcat, a second paysvc process).
//
// The registry is process-wide because the clients are made in many packages from
// a list of broker addresses: Dial looks the address up and falls back to TCP for
// anything that is not an embedded broker of this process.
package inproc
