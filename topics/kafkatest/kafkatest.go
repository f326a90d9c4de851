// Package kafkatest gives a test its Kafka: the shared real Apache Kafka cluster
// that `make test` starts (ops/kafka/kafka.sh, three KRaft nodes on loopback), or
// a fresh in-process kfake broker. On the shared cluster every test service gets
// a namespace of its own (topics.Namespace), so tests running at once never read
// each other's commands, and its topics and groups are deleted when the test ends.
//
// Which one a test gets:
//   - PAYSVC_TEST_KAFKA=real: every test that can, on the real cluster
//     (PAYSVC_TEST_KAFKA_BROKERS must name it);
//   - PAYSVC_TEST_KAFKA=kfake: every test on kfake;
//   - unset: the test binaries that called PreferReal (the whole-service, relay
//     and dispatcher tests) on the real cluster when PAYSVC_TEST_KAFKA_BROKERS is
//     set, the rest on kfake, which is faster and enough where a test only needs
//     the protocol.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"paysvc/topics"
)

// The environment variables that choose the Kafka of the tests.
const (
	EnvMode    = "PAYSVC_TEST_KAFKA"
	EnvBrokers = "PAYSVC_TEST_KAFKA_BROKERS"
)

var preferReal atomic.Bool

// PreferReal makes the tests of this test binary use the real cluster whenever
// PAYSVC_TEST_KAFKA_BROKERS names one (and PAYSVC_TEST_KAFKA is not kfake). Call
// it from TestMain.
func PreferReal() { preferReal.Store(true) }

// Real says whether this test binary's tests run on the real cluster.
func Real() bool {
	switch os.Getenv(EnvMode) {
	case "kfake":
		return false
	case "real":
		return true
	}
	return preferReal.Load() && os.Getenv(EnvBrokers) != ""
}

// Brokers is the shared real cluster's bootstrap list. It fails the test when
// none is given: PAYSVC_TEST_KAFKA=real without a cluster is a broken set-up,
// never a reason to pass on kfake.
func Brokers(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, b := range strings.Split(os.Getenv(EnvBrokers), ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s=real needs the real cluster in %s (make test starts it: ops/kafka/kafka.sh start)", EnvMode, EnvBrokers)
	}
	return out
}

// NewNamespace returns a namespace no other test uses. With brokers (a real
// cluster), the namespace's topics and groups are deleted when the test ends,
// after the services the test started later (t.Cleanup runs last-in first-out),
// so the shared cluster holds only the topics of tests still running.
func NewNamespace(t testing.TB, brokers []string) topics.Namespace {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := topics.Namespace("t" + hex.EncodeToString(b) + ".")
	if len(brokers) > 0 {
		t.Cleanup(func() { deleteNamespace(t, brokers, ns) })
	}
	return ns
}

// Cluster is a Kafka for a test that builds its components by hand: the real
// cluster and a fresh namespace when Real, else a new kfake cluster (started
// with opts, closed when the test ends) and the empty namespace.
func Cluster(t testing.TB, opts ...kfake.Opt) ([]string, topics.Namespace) {
	t.Helper()
	if Real() {
		brokers := Brokers(t)
		return brokers, NewNamespace(t, brokers)
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs(), ""
}

// deleteNamespace deletes every topic and consumer group of ns. A failure is
// logged, not fatal: the test's result stands, and the next `make kafka-stop`
// or a fresh cluster clears what is left.
func deleteNamespace(t testing.TB, brokers []string, ns topics.Namespace) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Logf("kafkatest: delete namespace %s: %v", ns, err)
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if groups, err := adm.ListGroups(ctx); err == nil {
		var mine []string
		for _, g := range groups.Groups() {
			if strings.HasPrefix(g, string(ns)) {
				mine = append(mine, g)
			}
		}
		if len(mine) > 0 {
			_, _ = adm.DeleteGroups(ctx, mine...)
		}
	}
	listed, err := adm.ListTopics(ctx)
	if err != nil {
		t.Logf("kafkatest: list topics of %s: %v", ns, err)
		return
	}
	var mine []string
	for _, name := range listed.Names() {
		if strings.HasPrefix(name, string(ns)) {
			mine = append(mine, name)
		}
	}
	if len(mine) == 0 {
		return
	}
	if _, err := adm.DeleteTopics(ctx, mine...); err != nil {
		t.Logf("kafkatest: delete topics of %s: %v", ns, err)
	}
}

// KnownToEveryBroker waits until every broker of the cluster knows the topics
// and a leader for each of their partitions. EnsureTopics returns once the
// broker that answered knows them; on a real cluster the others learn of them a
// moment later (seconds, on a busy machine), and a produce meanwhile fails with
// UNKNOWN_TOPIC_OR_PARTITION once kgo's UnknownTopicRetries (4) are spent, which
// makes a relay give up its lead (Relay.Run) and another take it. kfake knows
// them at once.
func KnownToEveryBroker(ctx context.Context, cl *kgo.Client, names []string) error {
	brokers, err := kadm.NewClient(cl).ListBrokers(ctx)
	if err != nil {
		return err
	}
	for _, b := range brokers {
		err := topics.UntilVisible(ctx, func() error {
			req := kmsg.NewPtrMetadataRequest()
			for _, name := range names {
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(name)
				req.Topics = append(req.Topics, rt)
			}
			resp, err := req.RequestWith(ctx, cl.Broker(int(b.NodeID)))
			if err != nil {
				return err
			}
			for _, rt := range resp.Topics {
				name := ""
				if rt.Topic != nil {
					name = *rt.Topic
				}
				if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				if len(rt.Partitions) == 0 {
					return fmt.Errorf("%s: no partitions: %w", name, kerr.UnknownTopicOrPartition)
				}
				for _, p := range rt.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						return fmt.Errorf("%s/%d: %w", name, p.Partition, err)
					}
					if p.Leader < 0 {
						return fmt.Errorf("%s/%d: %w", name, p.Partition, kerr.LeaderNotAvailable)
					}
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("broker %d: %w", b.NodeID, err)
		}
	}
	return nil
}

// ProduceRefused is the broker's answer that refuses every partition of req with
// the error code, for a kfake ControlKey(ProduceKey) hook that makes produces fail.
func ProduceRefused(req *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
