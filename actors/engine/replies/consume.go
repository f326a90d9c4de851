package replies

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/topics"
	"paysvc/topics/inproc"
)

// Remote reads paysvc.replies.v1 and delivers the replies meant for a hub: those of
// commands that an engine in another process applied.
type Remote struct {
	cl  *kgo.Client
	h   *Hub
	log *slog.Logger
}

// NewRemote fixes where reading starts, the end of each partition as of now
// (topics.EndOffsets), before it returns. Started before the API serves, it sees the
// reply of every command the API sends. It reads the replies topic of namespace ns.
func NewRemote(ctx context.Context, brokers []string, ns topics.Namespace, h *Hub, admin *kgo.Client, log *slog.Logger) (*Remote, error) {
	start, err := topics.EndOffsets(ctx, admin, ns, topics.RepliesTopic)
	if err != nil {
		return nil, fmt.Errorf("replies: %w", err)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...), kgo.Dialer(inproc.Dial),
		kgo.ConsumePartitions(start),
		kgo.ClientID("paysvc-replies-"+h.instance),
		kgo.FetchMaxPartitionBytes(topics.MaxRecordBytes),
	)
	if err != nil {
		return nil, err
	}
	return &Remote{cl: cl, h: h, log: log}, nil
}

// Run delivers replies until ctx ends, then closes the client.
func (r *Remote) Run(ctx context.Context) error {
	defer r.cl.Close()
	for {
		fetches := r.cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			if string(rec.Key) != r.h.instance {
				return
			}
			rep, err := topics.DecodeReply(rec.Value)
			if err != nil {
				r.log.Warn("undecodable reply", "err", err)
				return
			}
			r.h.Deliver(rep)
		})
	}
}
