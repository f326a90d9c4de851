package replies

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/topics"
)

// ConsumeRemote reads paysvc.replies.v1 from its end and delivers the replies meant
// for this hub: those of commands that an engine in another process applied.
func ConsumeRemote(ctx context.Context, brokers []string, h *Hub, log *slog.Logger) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topics.RepliesTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.ClientID("paysvc-replies-"+h.instance),
		kgo.FetchMaxPartitionBytes(topics.MaxRecordBytes),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if string(r.Key) != h.instance {
				return
			}
			rep, err := topics.DecodeReply(r.Value)
			if err != nil {
				log.Warn("undecodable reply", "err", err)
				return
			}
			h.Deliver(rep)
		})
	}
}
