// Package nettest gives tests the network endpoints they need that the standard
// library does not: an address that refuses every connection for as long as the
// test runs, for a peer that is down. It is test support (only tests import it)
// and, like the other value packages, imports nothing of paysvc, so the tests of
// every layer may use it.
package nettest
