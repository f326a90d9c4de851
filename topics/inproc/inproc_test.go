package inproc_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/topics/inproc"
)

// TestEmbeddedBrokerOverPipesAndTCP: a client of this process that dials through
// inproc reaches the embedded broker in memory, a client that does not (kcat, a
// second process) still reaches it over TCP, both see the same log, and once the
// broker is closed an in-process dial is refused as TCP would refuse it.
func TestEmbeddedBrokerOverPipesAndTCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.ListenFn(inproc.Listen), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	addrs := cluster.ListenAddrs()
	inprocBefore := testutil.ToFloat64(inproc.Dials("inproc"))

	local, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.Dialer(inproc.Dial), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	for i := range 100 {
		if err := local.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(inproc.Dials("inproc")) - inprocBefore; got < 1 {
		t.Fatalf("in-process connections opened: %v, want at least 1", got)
	}

	remote, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	var got []byte
	for len(got) < 100 {
		fs := remote.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Value...) })
	}
	for i, b := range got {
		if int(b) != i {
			t.Fatalf("record %d over TCP holds %d: the two paths do not share one log", i, b)
		}
	}

	cluster.Close()
	_, err = inproc.Dial(ctx, "tcp", addrs[0])
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after the broker closed: %v, want connection refused", err)
	}
}

// TestCompressionOnlyOffTheProcess: a producer of this process writes uncompressed
// batches to an embedded broker of this process (nothing to save over a pipe, and
// its consumers here would only decompress them again) and keeps kgo's snappy for a
// broker it reaches over TCP.
func TestCompressionOnlyOffTheProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	embedded, err := kfake.NewCluster(kfake.ListenFn(inproc.Listen), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Close()
	remote, err := kfake.NewCluster(kfake.SeedTopics(1, "t")) // not registered: reached over TCP
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	value := []byte(strings.Repeat("compressible ", 100))
	for _, tc := range []struct {
		name  string
		addrs []string
		want  uint8 // kgo's CompressionType: 0 none, 2 snappy
	}{
		{"embedded", embedded.ListenAddrs(), 0},
		{"tcp", remote.ListenAddrs(), 2},
		{"mixed", append(embedded.ListenAddrs(), remote.ListenAddrs()...), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs := tc.addrs[len(tc.addrs)-1:] // the cluster the records land on
			p, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.Dialer(inproc.Dial), inproc.Compression(tc.addrs),
				kgo.DefaultProduceTopic("t"))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if err := p.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			c, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics("t"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fs := c.PollRecords(ctx, 1)
			if err := fs.Err0(); err != nil {
				t.Fatal(err)
			}
			recs := fs.Records()
			if len(recs) == 0 {
				t.Fatal("no record fetched")
			}
			if got := recs[0].Attrs.CompressionType(); got != tc.want || string(recs[0].Value) != string(value) {
				t.Fatalf("compression %d (value intact %v), want %d", got, string(recs[0].Value) == string(value), tc.want)
			}
		})
	}
}
