// Package mpesatest is a wire-level fake of Safaricom's Daraja API for tests,
// as net/http/httptest is to net/http: NewFakeDaraja starts a local HTTP
// server that speaks Daraja's OAuth, STK push, STK query, B2C and Transaction
// Status formats, checks credentials and fields as Daraja does, records what
// it took, and leaves every outcome to the test (Complete, Lose, CompleteB2C,
// FailNextPush, FaultNextPush...).
//
// It speaks the wire format from its own code, not package mpesa's, so that
// a mistake in the adapter is a test failure rather than an agreement. Only
// tests import it: TestLayers (cmd/paysvc) fails if a non-test package does,
// so the fake never ships in the service binary.
package mpesatest
