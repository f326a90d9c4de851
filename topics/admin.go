package topics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnsureTopics creates the commands, replies and event topics if they are missing,
// with the durability of Provision and its default retention, in namespace ns.
// commandPartitions bounds how many engine instances can share the work.
func EnsureTopics(ctx context.Context, cl *kgo.Client, ns Namespace, commandPartitions int32) error {
	_, err := Provision(ctx, cl, Settings{Namespace: ns, CommandPartitions: commandPartitions})
	return err
}

// Settings are what paysvc asks of its topics. Zero durations take the defaults.
type Settings struct {
	// Namespace prefixes every topic name on the cluster (PAYSVC_KAFKA_NAMESPACE).
	Namespace Namespace
	// CommandPartitions is the command topic's partition count: how many engine
	// instances can share the work. It is fixed once the topic exists (see
	// Provision).
	CommandPartitions int32
	// CommandRetention is how long the command log, the rail requests and the
	// payment-file callbacks keep their records (retention.ms). Engine offsets
	// live in PostgreSQL: an engine stopped for longer than this would resume
	// past commands it never applied, which the engine refuses at start
	// (docs/cluster.md, "Retention").
	CommandRetention time.Duration
	// EventRetention is how long the event topics keep their records: how long a
	// downstream consumer may be away and still resume from its committed offset.
	EventRetention time.Duration
}

// DefaultCommandRetention and DefaultEventRetention are seven days: a long
// weekend's outage of the engines or of a downstream consumer, twice over.
const (
	DefaultCommandRetention = 7 * 24 * time.Hour
	DefaultEventRetention   = 7 * 24 * time.Hour
	// RepliesRetention: a reply is read by the API instance waiting for it within
	// its reply timeout (seconds); an hour is plenty for a restarted instance's
	// late reads, and keeps the busiest topic small.
	RepliesRetention = time.Hour
)

// Durability is the replication of every paysvc topic on a cluster of a given
// size: three copies where there are three brokers, and a write acknowledged
// (acks=all) only once all but one of them have it. So one broker may be lost,
// or restarted, without losing or refusing an acknowledged write; with two down,
// writes are refused (NOT_ENOUGH_REPLICAS) rather than acknowledged on one copy.
type Durability struct {
	Replication int16
	MinInSync   int
}

// DurabilityFor is the durability of a cluster of n brokers: replication
// min(3, n) and min.insync.replicas replication-1, at least 1.
func DurabilityFor(brokers int) Durability {
	rf := min(3, max(1, brokers))
	return Durability{Replication: int16(rf), MinInSync: max(1, rf-1)}
}

// Finding is a topic setting weaker than Provision asks, found on an existing
// topic: Fixed when Provision could set it (a topic config), else it needs an
// operator (replication factor, partition count), and the text says what to do.
type Finding struct {
	Topic, Setting string
	Have, Want     string
	Fixed          bool
	Detail         string
}

func (f Finding) String() string {
	s := fmt.Sprintf("%s: %s is %s, want %s", f.Topic, f.Setting, f.Have, f.Want)
	if f.Fixed {
		return s + " (set now)"
	}
	return s + ": " + f.Detail
}

// Provision creates paysvc's topics where missing and checks those that exist:
// replication factor and min.insync.replicas from DurabilityFor (the brokers the
// cluster lists), unclean leader election off (an out-of-sync replica elected
// leader drops acknowledged records), delete cleanup, and retention on purpose.
// Existing topics with weaker configs are set (configs are dynamic); weaker
// replication or fewer command partitions are returned as findings for an
// operator: a partition reassignment is a cluster operation, and more command
// partitions would move merchants to other partitions while their unapplied
// commands wait in the old ones, so their order would be lost.
func Provision(ctx context.Context, cl *kgo.Client, s Settings) ([]Finding, error) {
	if s.CommandRetention <= 0 {
		s.CommandRetention = DefaultCommandRetention
	}
	if s.EventRetention <= 0 {
		s.EventRetention = DefaultEventRetention
	}
	if s.CommandPartitions <= 0 {
		s.CommandPartitions = 1
	}
	adm := kadm.NewClient(cl)
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return nil, fmt.Errorf("list brokers: %w", err)
	}
	d := DurabilityFor(len(brokers))
	// Keyed by the names on the cluster: that is what an operator sees in the
	// findings and what the describes below answer with.
	want := map[string]wantTopic{}
	for logical, w := range wantTopics(s, d) {
		want[s.Namespace.Topic(logical)] = w
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)

	// One CreateTopics request per shape (partitions and configs), not one per
	// topic: each waits for the controller, and a start on a busy cluster
	// should not wait a dozen times.
	shapes := map[string][]string{}
	var order []string
	for _, name := range names {
		w := want[name]
		key := fmt.Sprint(w.partitions, w.config)
		if shapes[key] == nil {
			order = append(order, key)
		}
		shapes[key] = append(shapes[key], name)
	}
	for _, key := range order {
		group := shapes[key]
		w := want[group[0]]
		resps, err := adm.CreateTopics(ctx, w.partitions, d.Replication, w.configs(), group...)
		if err != nil {
			return nil, fmt.Errorf("create topics %v: %w", group, err)
		}
		for _, r := range resps.Sorted() {
			if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
				return nil, fmt.Errorf("create topic %s: %w", r.Topic, r.Err)
			}
		}
	}
	return checkTopics(ctx, adm, names, want, s.Namespace.Topic(CommandsTopic), d)
}

// wantTopic is one topic as Provision creates it.
type wantTopic struct {
	partitions int32
	config     map[string]string
}

// configs are the configs a topic is created with: all that Provision wants but
// those it only checks where the broker has them.
func (w wantTopic) configs() map[string]*string {
	out := make(map[string]*string, len(w.config))
	for k, v := range w.config {
		if !checkedWherePresent[k] {
			out[k] = &v
		}
	}
	return out
}

// checkedWherePresent are configs set on existing topics only where the broker
// describes them. unclean.leader.election.enable is false by Apache Kafka's
// default, and a broker changed to true is overridden per topic; kfake (the
// embedded development broker) has no leader election and refuses the key.
var checkedWherePresent = map[string]bool{"unclean.leader.election.enable": true}

func wantTopics(s Settings, d Durability) map[string]wantTopic {
	ms := func(t time.Duration) string { return strconv.FormatInt(t.Milliseconds(), 10) }
	base := func(retention time.Duration) map[string]string {
		return map[string]string{
			"min.insync.replicas":            strconv.Itoa(d.MinInSync),
			"unclean.leader.election.enable": "false",
			"cleanup.policy":                 "delete",
			"retention.ms":                   ms(retention),
		}
	}
	large := func(c map[string]string) map[string]string {
		c["max.message.bytes"] = strconv.Itoa(MaxRecordBytes)
		return c
	}
	out := map[string]wantTopic{
		CommandsTopic: {s.CommandPartitions, large(base(s.CommandRetention))},
		RepliesTopic:  {4, large(base(RepliesRetention))},
	}
	for _, t := range []string{RailsMpesaSTKTopic, RailsCardTopic, RailsPesalinkTopic, RailsPayoutTopic, CallbackTopic} {
		out[t] = wantTopic{4, base(s.CommandRetention)}
	}
	for _, t := range EventTopics {
		out[t] = wantTopic{4, base(s.EventRetention)}
	}
	return out
}

// checkTopics compares the existing topics with what Provision wants, sets the
// configs that are weaker, and returns every finding.
func checkTopics(ctx context.Context, adm *kadm.Client, names []string, want map[string]wantTopic, commands string, d Durability) ([]Finding, error) {
	var findings []Finding
	details, err := describeCreated(ctx, adm, names)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		td := details[name]
		if rf := topicReplication(td); rf < int(d.Replication) {
			findings = append(findings, Finding{Topic: name, Setting: "replication factor", Have: strconv.Itoa(rf),
				Want: strconv.Itoa(int(d.Replication)), Detail: "losing a broker can lose acknowledged records; " +
					"raise it with a partition reassignment (kafka-reassign-partitions.sh)"})
		}
		if name == commands && int32(len(td.Partitions)) < want[name].partitions {
			findings = append(findings, Finding{Topic: name, Setting: "partitions", Have: strconv.Itoa(len(td.Partitions)),
				Want: strconv.Itoa(int(want[name].partitions)), Detail: "left as it is: more partitions would move merchants " +
					"while their commands wait in the old ones (docs/cluster.md); run at most that many engines"})
		}
	}
	var described kadm.ResourceConfigs
	if err := UntilVisible(ctx, func() error {
		described, err = adm.DescribeTopicConfigs(ctx, names...)
		if err != nil {
			return err
		}
		for _, rc := range described {
			if rc.Err != nil {
				return fmt.Errorf("describe configs of %s: %w", rc.Name, rc.Err)
			}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("describe topic configs: %w", err)
	}
	byTopic := map[string][]kadm.AlterConfig{}
	for _, rc := range described {
		have := map[string]string{}
		for _, c := range rc.Configs {
			have[c.Key] = c.MaybeValue()
		}
		for key, w := range want[rc.Name].config {
			h, ok := have[key]
			if ok && !weaker(key, h, w) || !ok && checkedWherePresent[key] {
				continue
			}
			f := Finding{Topic: rc.Name, Setting: key, Have: h, Want: w, Fixed: true}
			if !ok {
				f.Have = "unset"
			}
			findings = append(findings, f)
			byTopic[rc.Name] = append(byTopic[rc.Name], kadm.AlterConfig{Op: kadm.SetConfig, Name: key, Value: &w})
		}
	}
	for topic, alter := range byTopic {
		res, err := adm.AlterTopicConfigs(ctx, alter, topic)
		if err != nil {
			return nil, fmt.Errorf("set configs of %s: %w", topic, err)
		}
		for _, r := range res {
			if r.Err != nil {
				return nil, fmt.Errorf("set configs of %s: %w", r.Name, r.Err)
			}
		}
	}
	slices.SortFunc(findings, func(a, b Finding) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		if a.Setting < b.Setting {
			return -1
		}
		if a.Setting > b.Setting {
			return 1
		}
		return 0
	})
	return findings, nil
}

// describeCreated describes the topics, waiting (UntilVisible) for those just
// created to be known to the broker that answers.
func describeCreated(ctx context.Context, adm *kadm.Client, names []string) (kadm.TopicDetails, error) {
	var details kadm.TopicDetails
	err := UntilVisible(ctx, func() error {
		var err error
		if details, err = adm.ListTopics(ctx, names...); err != nil {
			return err
		}
		for _, name := range names {
			td, ok := details[name]
			if !ok {
				return fmt.Errorf("topic %s: %w", name, kerr.UnknownTopicOrPartition)
			}
			if td.Err != nil {
				return fmt.Errorf("topic %s: %w", name, td.Err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("describe topics: %w", err)
	}
	return details, nil
}

// UntilVisible runs f until it succeeds or fails with anything but a topic not
// known (yet) to the broker that answered: a topic just created reaches every
// broker's metadata a moment after CreateTopics answers, and a request to a broker
// that has not heard of it yet fails with UNKNOWN_TOPIC_OR_PARTITION (or, for a
// partition without a leader yet, LEADER_NOT_AVAILABLE). ctx bounds the wait.
func UntilVisible(ctx context.Context, f func() error) error {
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err := f()
		if err == nil || !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.LeaderNotAvailable) &&
			!errors.Is(err, kerr.NotLeaderForPartition) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (waited for the topics to be visible: %v)", err, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// weaker says whether an existing config value h is weaker than w, what
// Provision asks. Numbers are weaker when smaller (retention, record size,
// min.insync.replicas): a larger value an operator chose is kept. The others
// must be what is asked.
func weaker(key, h, w string) bool {
	switch key {
	case "retention.ms", "max.message.bytes", "min.insync.replicas":
		hv, err1 := strconv.ParseInt(h, 10, 64)
		wv, err2 := strconv.ParseInt(w, 10, 64)
		if err1 != nil || err2 != nil {
			return h != w
		}
		if key == "retention.ms" && hv < 0 { // -1: kept forever
			return false
		}
		return hv < wv
	default:
		return h != w
	}
}

// topicReplication is the smallest replica count of a topic's partitions.
func topicReplication(td kadm.TopicDetail) int {
	rf := -1
	for _, p := range td.Partitions {
		if rf < 0 || len(p.Replicas) < rf {
			rf = len(p.Replicas)
		}
	}
	return max(rf, 0)
}

// MaxRecordBytes is the largest command or reply record: a payment file of 10,000
// transactions is one command of a few megabytes (and its reply as large). Producers
// of those topics raise their batch limit to it, and the topics accept it.
const MaxRecordBytes = 16 << 20

// EndOffsets is where a consumer that wants only what comes next starts: the end of
// each partition of the topics as of this call, fixed before the caller goes on.
// kgo's AtEnd (and AfterMilli, which falls back to an end listed by a later request)
// is resolved lazily at the first fetch, and a record produced before that lookup
// would be skipped. The topics are logical names of namespace ns; the map is keyed
// by their names on the cluster, as kgo.ConsumePartitions takes it.
func EndOffsets(ctx context.Context, cl *kgo.Client, ns Namespace, logical ...string) (map[string]map[int32]kgo.Offset, error) {
	var ends kadm.ListedOffsets
	err := UntilVisible(ctx, func() error {
		var err error
		ends, err = kadm.NewClient(cl).ListEndOffsets(ctx, ns.Topics(logical...)...)
		if err == nil {
			err = ends.Error()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	start := map[string]map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if start[o.Topic] == nil {
			start[o.Topic] = map[int32]kgo.Offset{}
		}
		start[o.Topic][o.Partition] = kgo.NewOffset().At(o.Offset)
	})
	return start, nil
}
