package service

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jmoiron/sqlx"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/storage"
	"paysvc/topics"
)

// checkCommandLog refuses to run an engine on a command log that is behind the
// offsets stored in Postgres: that log is not the one the database consumed (its
// data was deleted, or it is another cluster), and resuming would skip every new
// command below the stored offset. With accept, the stored offsets move to the
// log's end instead; commands applied before are still recognised by their ids.
// The log is namespace ns's command topic; the database stores its logical name.
func checkCommandLog(ctx context.Context, db *sqlx.DB, cl *kgo.Client, ns topics.Namespace, accept bool, log *slog.Logger) error {
	stored, err := storage.StoredOffsets(ctx, db, topics.CommandsTopic)
	if err != nil || len(stored) == 0 {
		return err
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, ns.Topic(topics.CommandsTopic))
	if err != nil {
		return fmt.Errorf("command log end offsets: %w", err)
	}
	behind := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if want, ok := stored[o.Partition]; ok && o.Err == nil && o.Offset < want {
			behind[o.Partition] = o.Offset
		}
	})
	if len(behind) == 0 {
		return nil
	}
	if !accept {
		return fmt.Errorf("the command log is behind the database on %d partition(s) (e.g. partition's end offsets %v, "+
			"stored %v): the Kafka data was lost or this is another cluster. Nothing was changed. If the log was lost on "+
			"purpose, start once with PAYSVC_ACCEPT_COMMAND_LOG_RESET=true to continue from the log's end", len(behind), behind, stored)
	}
	log.Warn("command log behind the database: moving stored offsets to the log's end", "partitions", behind)
	return storage.ResetOffsets(ctx, db, topics.CommandsTopic, behind)
}
