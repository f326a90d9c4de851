package deadline

import (
	"io"
	"net/http"
	"time"
)

// Options are the bounds of a request.
type Options struct {
	// MinRate is the slowest average rate, in bytes per second, at which a body is
	// read to its end.
	MinRate int64
	// Grace is how much later than MinRate allows a body may end: the time for its
	// first bytes (and for a slow start) on top of size/MinRate.
	Grace time.Duration
	// Write is how long the answer may take once the body has been read: longer
	// than the slowest handler (a write waits up to the reply timeout).
	Write time.Duration
	// MaxBody is the largest body a route takes; it bounds the write deadline of a
	// request whose body is never read to its end.
	MaxBody int64
}

// Handler applies the bounds to every request with a body before next sees it.
// Requests without a body are bounded by the server's own WriteTimeout (counted
// from the end of the headers), which should equal o.Write.
func Handler(next http.Handler, o Options) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || o.MinRate <= 0 {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		now := time.Now()
		size := r.ContentLength
		if size < 0 || size > o.MaxBody {
			size = o.MaxBody
		}
		b := &body{rc: rc, rd: r.Body, start: now, o: o}
		// Until the body ends, the answer may not be written later than the whole
		// body could take at the minimum rate plus the write bound: a handler that
		// never reads the body still has a bounded write.
		_ = rc.SetWriteDeadline(now.Add(o.Grace + rateTime(size, o.MinRate) + o.Write))
		_ = rc.SetReadDeadline(b.readDeadline(0))
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

// rateTime is how long n bytes take at rate bytes per second.
func rateTime(n, rate int64) time.Duration {
	return time.Duration(float64(n) / float64(rate) * float64(time.Second))
}

// body is a request body whose every read must end by the deadline that the
// minimum rate gives the bytes read so far.
type body struct {
	rc    *http.ResponseController
	rd    io.ReadCloser
	start time.Time
	o     Options
	n     int64
	ended bool
}

// readDeadline is when a read of up to want more bytes must end: the bytes read
// so far plus at most one second's worth more, at the minimum rate, after the
// grace. A dribbler's deadline hardly moves; an honest slow upload's moves with it.
func (b *body) readDeadline(want int) time.Time {
	more := min(int64(want), b.o.MinRate)
	return b.start.Add(b.o.Grace + rateTime(b.n+more, b.o.MinRate))
}

func (b *body) Read(p []byte) (int, error) {
	if b.ended {
		return b.rd.Read(p)
	}
	_ = b.rc.SetReadDeadline(b.readDeadline(len(p)))
	n, err := b.rd.Read(p)
	b.n += int64(n)
	if err == io.EOF {
		// The body is in: no read deadline while the handler works (the server
		// watches the connection for a close and would otherwise cancel the
		// request at the old deadline), and the answer's bound starts now.
		b.ended = true
		_ = b.rc.SetReadDeadline(time.Time{})
		_ = b.rc.SetWriteDeadline(time.Now().Add(b.o.Write))
	}
	return n, err
}

func (b *body) Close() error { return b.rd.Close() }
