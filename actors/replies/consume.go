package replies

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/topics"
)

// Remote reads paysvc.replies.v1 and delivers the replies meant for a hub: those of
// commands that an engine in another process applied.
type Remote struct {
	cl  *kgo.Client
	h   *Hub
	log *slog.Logger
}

// NewRemote fixes where reading starts, the end of each partition as of now, before
// it returns. Started before the API serves, it sees the reply of every command the
// API sends. (A lazily resolved AtEnd is looked up at the first fetch, and a reply
// produced before that would be skipped: its request would wait out the reply
// timeout and be answered from the stored reply.)
func NewRemote(ctx context.Context, brokers []string, h *Hub, admin *kgo.Client, log *slog.Logger) (*Remote, error) {
	ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, topics.RepliesTopic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("replies: list end offsets: %w", err)
	}
	start := map[string]map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if start[o.Topic] == nil {
			start[o.Topic] = map[int32]kgo.Offset{}
		}
		start[o.Topic][o.Partition] = kgo.NewOffset().At(o.Offset)
	})
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
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
