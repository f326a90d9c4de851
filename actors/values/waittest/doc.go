// Package waittest is how tests wait: Eventually polls a condition until it holds
// or a timeout passes, and Clock is a clock a test moves by hand where the code
// under test waits for time. It exists so that every test waits the same way, with
// the same backoff and the same failure message (what was still missing, and for
// how long it was waited for), instead of a deadline loop of its own.
//
// A test never sleeps to let something happen, nor to show that something did not:
// it waits for the event that would have caused it (a tick counter, an offset, a
// row) and then checks. The only sleeps left in tests are those whose delay is the
// thing under test (a slow receiver, a paced load).
//
// It lives beside the value packages because every layer may import them, and it
// imports nothing of paysvc. As a test-support package (its name ends in "test"),
// only tests and other test-support packages import it.
package waittest
