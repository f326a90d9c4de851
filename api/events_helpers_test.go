package api_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/topics"
)

func decodeEvent(b []byte) (topics.Event, error) {
	var ev topics.Event
	err := json.Unmarshal(b, &ev)
	return ev, err
}

func decodeTransfer(t *testing.T, b []byte) topics.WalletTransfer {
	t.Helper()
	var p topics.WalletTransfer
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// readLog reads env's topic (its logical name) from the start, giving each record
// to each, until done holds, within limit.
func readLog(t *testing.T, env *servicetest.Env, topic string, limit time.Duration, each func(*kgo.Record), done func() (bool, string)) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Svc.Brokers...), kgo.ConsumeTopics(env.Topic(topic)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waittest.Eventually(t, limit, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		cl.PollFetches(ctx).EachRecord(each)
		return done()
	})
}

// eventOf decodes a record of an event topic and its payload as P; a record that
// is not one is reported, and ok is false.
func eventOf[P any](t *testing.T, rec *kgo.Record) (ev topics.Event, p P, ok bool) {
	t.Helper()
	if json.Unmarshal(rec.Value, &ev) != nil || json.Unmarshal(ev.Payload, &p) != nil {
		t.Errorf("bad event %s", rec.Value)
		return ev, p, false
	}
	return ev, p, true
}
