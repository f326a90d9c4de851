package topics

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnsureTopics creates the commands, replies and event topics if they are missing.
// commandPartitions bounds how many engine instances can share the work.
func EnsureTopics(ctx context.Context, cl *kgo.Client, commandPartitions int32) error {
	adm := kadm.NewClient(cl)
	want := map[string]int32{CommandsTopic: commandPartitions, RepliesTopic: 4, RailsMpesaSTKTopic: 4, RailsCardTopic: 4, RailsPesalinkTopic: 4}
	for _, t := range EventTopics {
		want[t] = 4
	}
	for topic, parts := range want {
		resp, err := adm.CreateTopic(ctx, parts, -1, nil, topic)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
		if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", topic, resp.Err)
		}
	}
	return nil
}
