package inproc

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kgo"
)

// dials counts the connections this process's Kafka clients opened, by path, so an
// operator can see that the embedded broker is reached without a socket (and
// notice when a client was built without Dial).
var dials = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "paysvc_kafka_client_connections_total",
	Help: "Kafka connections opened by this process's clients: inproc (an embedded broker of this process, in memory) or tcp.",
}, []string{"path"})

// listeners holds the embedded brokers' listeners of this process by the address
// their clients dial (kfake advertises its listeners' addresses in metadata).
var listeners sync.Map // string -> *Listener

// Listen opens a TCP listener on address and registers it for Dial; its
// signature is kfake.ListenFn's.
func Listen(network, address string) (net.Listener, error) {
	tl, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	l := &Listener{tcp: tl, pipes: make(chan net.Conn), accepted: make(chan accepted), closed: make(chan struct{})}
	go l.acceptTCP()
	listeners.Store(tl.Addr().String(), l)
	return l, nil
}

// Dial connects to address: an in-memory pipe when it is an embedded broker of
// this process, otherwise TCP. Its signature is kgo.Dialer's.
func Dial(ctx context.Context, network, address string) (net.Conn, error) {
	if v, ok := listeners.Load(address); ok {
		if c, err := v.(*Listener).dial(ctx); err == nil {
			dials.WithLabelValues("inproc").Inc()
			return c, nil
		}
		// Closed while we looked: what TCP says (connection refused) is the answer.
	}
	d := net.Dialer{Timeout: 10 * time.Second} // kgo's own dialer, which a Dialer option replaces
	c, err := d.DialContext(ctx, network, address)
	if err == nil {
		dials.WithLabelValues("tcp").Inc()
	}
	return c, err
}

// Listener is a TCP listener that also accepts in-process connections.
type Listener struct {
	tcp       net.Listener
	pipes     chan net.Conn
	accepted  chan accepted
	closed    chan struct{}
	closeOnce sync.Once
}

type accepted struct {
	conn net.Conn
	err  error
}

var errClosed = errors.New("inproc: listener closed")

func (l *Listener) acceptTCP() {
	for {
		c, err := l.tcp.Accept()
		select {
		case l.accepted <- accepted{c, err}:
		case <-l.closed:
			if c != nil {
				c.Close()
			}
			return
		}
		if err != nil {
			// The broker stops listening on any accept error, as it did on a bare
			// TCP listener.
			return
		}
	}
}

// Accept returns the next connection, from TCP or from Dial.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.pipes:
		return c, nil
	case a := <-l.accepted:
		return a.conn, a.err
	case <-l.closed:
		return nil, errClosed
	}
}

func (l *Listener) dial(ctx context.Context) (net.Conn, error) {
	server, client := Pipe()
	select {
	case l.pipes <- server:
		return client, nil
	case <-l.closed:
	case <-ctx.Done():
	}
	server.Close()
	client.Close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, errClosed
}

// Close stops both kinds of connection: Dial falls back to TCP, which refuses.
func (l *Listener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		listeners.CompareAndDelete(l.tcp.Addr().String(), l)
		close(l.closed)
		err = l.tcp.Close()
	})
	return err
}

// Addr is the TCP address, which the broker advertises.
func (l *Listener) Addr() net.Addr { return l.tcp.Addr() }

// Compression is the batch compression for a producer whose seeds are brokers:
// none when every seed is an embedded broker of this process, kgo's default
// (snappy, else none) otherwise.
//
// Why: compression saves bytes on a network, and over an in-memory pipe there is
// none. kgo compresses every produced batch by default, and the consumers of this
// process decompress it again: under transfer load that was ~1.6% of the service's
// CPU for nothing (docs/benchmarks-history.md). A broker elsewhere (compose's
// Kafka) keeps the default.
//
// A producer must keep its batches within the max.message.bytes of the topics it
// writes without counting on compression: uncompressed, a batch is as large as its
// records (relay.BatchMaxBytes, for the event topics).
func Compression(seeds []string) kgo.Opt {
	embedded := len(seeds) > 0
	for _, s := range seeds {
		if _, ok := listeners.Load(s); !ok {
			embedded = false
		}
	}
	if embedded {
		return kgo.ProducerBatchCompression(kgo.NoCompression())
	}
	return kgo.ProducerBatchCompression(kgo.SnappyCompression(), kgo.NoCompression())
}
