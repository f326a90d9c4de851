package inproc_test

import (
	"net"
	"testing"

	"golang.org/x/net/nettest"

	"paysvc/topics/inproc"
)

// TestPipeIsANetConn runs the net.Conn conformance suite of golang.org/x/net
// (reads and writes in both directions, concurrent use, deadlines in the past,
// the future and moved while blocked, close while blocked, EOF after the
// peer's close) over the buffered pipe.
func TestPipeIsANetConn(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		c1, c2 = inproc.Pipe()
		return c1, c2, func() { c1.Close(); c2.Close() }, nil
	})
}
