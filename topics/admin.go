package topics

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnsureTopics creates the commands, replies and event topics if they are missing.
// commandPartitions bounds how many engine instances can share the work.
func EnsureTopics(ctx context.Context, cl *kgo.Client, ns Namespace, commandPartitions int32) error {
	adm := kadm.NewClient(cl)
	want := map[string]int32{CommandsTopic: commandPartitions, RepliesTopic: 4, RailsMpesaSTKTopic: 4, RailsCardTopic: 4, RailsPesalinkTopic: 4,
		RailsPayoutTopic: 4, CallbackTopic: 4}
	for _, t := range EventTopics {
		want[t] = 4
	}
	maxBytes := strconv.Itoa(MaxRecordBytes)
	large := map[string]bool{CommandsTopic: true, RepliesTopic: true}
	for topic, parts := range want {
		var cfg map[string]*string
		if large[topic] {
			cfg = map[string]*string{"max.message.bytes": &maxBytes}
		}
		resp, err := adm.CreateTopic(ctx, parts, -1, cfg, ns.Topic(topic))
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", ns.Topic(topic), err)
		}
		if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", ns.Topic(topic), resp.Err)
		}
	}
	// Topics made before the limit was raised get it too.
	var alter []kadm.AlterConfig
	alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &maxBytes})
	res, err := adm.AlterTopicConfigs(ctx, alter, ns.Topics(CommandsTopic, RepliesTopic)...)
	if err != nil {
		return fmt.Errorf("set max.message.bytes: %w", err)
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("set max.message.bytes of %s: %w", r.Name, r.Err)
		}
	}
	return nil
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
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, ns.Topics(logical...)...)
	if err == nil {
		err = ends.Error()
	}
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
