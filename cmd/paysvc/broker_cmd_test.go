package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	execpkg "os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/values/waittest"
	"paysvc/topics"
)

// TestBrokerChild is not a test: TestBrokerSurvivesSIGKILL runs this test binary
// again with PAYSVC_TEST_BROKER_ARGS set, and then it is `paysvc broker` with those
// arguments, a process that can be killed (no go build needed).
func TestBrokerChild(t *testing.T) {
	args := os.Getenv("PAYSVC_TEST_BROKER_ARGS")
	if args == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := run(ctx, append([]string{"paysvc", "broker"}, strings.Fields(args)...), os.Getenv, io.Discard, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// `paysvc broker` keeps every acknowledged record across a SIGKILL (kfake writes
// each batch before answering the produce; no fsync needed for a process kill), and
// stops cleanly on SIGTERM.
func TestBrokerSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := 0
	for port == 0 {
		p := 20000 + rand.IntN(12000) // below the ephemeral range: the restart needs it again
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			l.Close()
			port = p
		}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	start := func() *execpkg.Cmd {
		cmd := execpkg.Command(os.Args[0], "-test.run=^TestBrokerChild$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("PAYSVC_TEST_BROKER_ARGS=--port %d --data-dir %s", port, dir),
			"PAYSVC_COMMAND_PARTITIONS=2", "PAYSVC_LOG_LEVEL=warn")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		waittest.Eventually(t, 30*time.Second, func() (bool, string) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return false, fmt.Sprintf("the broker never listened: %v", err)
			}
			c.Close()
			return true, ""
		})
		return cmd
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	first := start()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		r := &kgo.Record{Topic: topics.CommandsTopic, Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint("record-", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	cl.Close()
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	second := start()
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topics.CommandsTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	cctx, ccancel := context.WithTimeout(ctx, 15*time.Second)
	defer ccancel()
	for len(seen) < n && cctx.Err() == nil {
		cons.PollFetches(cctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	if len(seen) != n {
		t.Fatalf("after a SIGKILL and restart the broker holds %d of the %d acknowledged records", len(seen), n)
	}
	cons.Close()

	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- second.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("SIGTERM: the broker exited with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the broker did not stop within 15 s of SIGTERM")
	}
}
