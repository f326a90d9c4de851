package inproc

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// maxBuffered is how many unread bytes a writer may leave in one direction before
// its Write waits for the reader, as a socket's send buffer would make it wait. A
// single Write is never split, so a request larger than this still goes through
// (after the reader has drained what was there).
const maxBuffered = 4 << 20

// Pipe returns the two ends of a buffered, full-duplex in-memory connection.
//
// Unlike net.Pipe, a Write returns as soon as its bytes are buffered instead of
// waiting for the reader to take all of them: a Kafka client writes a request in
// one Write while the broker reads its 4-byte size and then its body, which
// net.Pipe turns into two goroutine hand-offs per message, each waking both
// sides. Here the writer goes on and the reader wakes once.
func Pipe() (net.Conn, net.Conn) {
	ab, ba := newHalf(), newHalf()
	a := &conn{in: ba, out: ab, done: make(chan struct{}), rd: newDeadline(), wd: newDeadline()}
	b := &conn{in: ab, out: ba, done: make(chan struct{}), rd: newDeadline(), wd: newDeadline()}
	return a, b
}

// half carries bytes one way. ready and space are signals with room for one
// (a pending signal is enough: the waiter looks at the state again when woken).
type half struct {
	mu     sync.Mutex
	buf    []byte
	off    int  // buf[off:] is unread
	closed bool // either end closed the connection
	ready  chan struct{}
	space  chan struct{}
}

func newHalf() *half {
	return &half{ready: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (h *half) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	signal(h.ready)
	signal(h.space)
}

type conn struct {
	in, out *half
	done    chan struct{} // closed by this end's Close
	once    sync.Once
	rd, wd  *deadline
}

// usable is what a Read or Write meets before any data: this end closed, or the
// deadline d passed.
func (c *conn) usable(d *deadline) error {
	switch {
	case isClosed(c.done):
		return net.ErrClosed
	case isClosed(d.wait()):
		return os.ErrDeadlineExceeded
	}
	return nil
}

func (c *conn) Read(p []byte) (int, error) {
	for {
		if err := c.usable(c.rd); err != nil {
			return 0, err
		}
		h := c.in
		h.mu.Lock()
		if h.off < len(h.buf) {
			n := copy(p, h.buf[h.off:])
			h.off += n
			if h.off == len(h.buf) {
				h.buf, h.off = h.buf[:0], 0
			}
			h.mu.Unlock()
			signal(h.space)
			return n, nil
		}
		// What was written before the peer closed is read first, then EOF.
		closed := h.closed
		h.mu.Unlock()
		if closed {
			return 0, io.EOF
		}
		if len(p) == 0 {
			return 0, nil
		}
		select {
		case <-h.ready:
		case <-c.rd.wait():
		case <-c.done:
		}
	}
}

func (c *conn) Write(b []byte) (int, error) {
	for {
		if err := c.usable(c.wd); err != nil {
			return 0, err
		}
		h := c.out
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return 0, io.ErrClosedPipe
		}
		if len(h.buf)-h.off < maxBuffered {
			if h.off > 0 && h.off >= len(h.buf)/2 {
				// Slide the unread bytes down rather than grow the buffer forever.
				h.buf = h.buf[:copy(h.buf, h.buf[h.off:])]
				h.off = 0
			}
			h.buf = append(h.buf, b...)
			h.mu.Unlock()
			signal(h.ready)
			return len(b), nil
		}
		h.mu.Unlock()
		select {
		case <-h.space:
		case <-c.wd.wait():
		case <-c.done:
		}
	}
}

// Close ends both directions: the peer reads what is buffered and then EOF, and
// its writes fail.
func (c *conn) Close() error {
	closed := false
	c.once.Do(func() {
		close(c.done)
		c.in.close()
		c.out.close()
		closed = true
	})
	if !closed {
		return net.ErrClosed
	}
	return nil
}

func (c *conn) LocalAddr() net.Addr  { return addr{} }
func (c *conn) RemoteAddr() net.Addr { return addr{} }

func (c *conn) SetDeadline(t time.Time) error {
	if isClosed(c.done) {
		return net.ErrClosed
	}
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

func (c *conn) SetReadDeadline(t time.Time) error {
	if isClosed(c.done) {
		return net.ErrClosed
	}
	c.rd.set(t)
	return nil
}

func (c *conn) SetWriteDeadline(t time.Time) error {
	if isClosed(c.done) {
		return net.ErrClosed
	}
	c.wd.set(t)
	return nil
}

type addr struct{}

func (addr) Network() string { return "inproc" }
func (addr) String() string  { return "inproc" }

// deadline is net.Pipe's: a channel closed when the time set passes.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{}
}

func newDeadline() *deadline { return &deadline{cancel: make(chan struct{})} }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer fired: wait until it has closed cancel
	}
	d.timer = nil
	closed := isClosed(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		cancel := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(cancel) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
