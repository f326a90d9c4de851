package service

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/storage"
	"paysvc/topics"
)

// checkCommandLog refuses to run an engine on a command log that does not hold
// what the offsets stored in PostgreSQL say comes next. Two ways it can fail:
//   - the log ends before a stored offset: that log is not the one the database
//     consumed (its data was deleted, or it is another cluster), and resuming
//     would skip every new command below the stored offset;
//   - the log starts after a stored offset: retention (PAYSVC_COMMAND_RETENTION)
//     deleted commands the engines never applied, because no engine ran for
//     longer than the retention. Resuming would skip them silently.
//
// With accept, the stored offsets move to where the log has records again (its
// end, or its start) and the engine goes on; commands applied before are still
// recognised by their ids if they come again. The gap is logged either way.
// The log is namespace ns's command topic; the database stores its logical name.
func checkCommandLog(ctx context.Context, db *sqlx.DB, cl *kgo.Client, ns topics.Namespace, retention time.Duration, accept bool, log *slog.Logger) error {
	stored, err := storage.StoredOffsets(ctx, db, topics.CommandsTopic)
	if err != nil || len(stored) == 0 {
		return err
	}
	adm := kadm.NewClient(cl)
	var ends, starts kadm.ListedOffsets
	err = topics.UntilVisible(ctx, func() error {
		var err error
		if ends, err = adm.ListEndOffsets(ctx, ns.Topic(topics.CommandsTopic)); err == nil {
			err = ends.Error()
		}
		if err != nil {
			return fmt.Errorf("command log end offsets: %w", err)
		}
		if starts, err = adm.ListStartOffsets(ctx, ns.Topic(topics.CommandsTopic)); err == nil {
			err = starts.Error()
		}
		if err != nil {
			return fmt.Errorf("command log start offsets: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	behind := map[int32]int64{}  // partition -> the log's end, below the stored offset
	deleted := map[int32]int64{} // partition -> the log's start, above the stored offset
	ends.Each(func(o kadm.ListedOffset) {
		if want, ok := stored[o.Partition]; ok && o.Offset < want {
			behind[o.Partition] = o.Offset
		}
	})
	starts.Each(func(o kadm.ListedOffset) {
		if want, ok := stored[o.Partition]; ok && o.Offset > want {
			if _, gone := behind[o.Partition]; !gone {
				deleted[o.Partition] = o.Offset
			}
		}
	})
	if len(behind) == 0 && len(deleted) == 0 {
		return nil
	}
	if !accept {
		var why []string
		if len(behind) > 0 {
			why = append(why, fmt.Sprintf("the command log is behind the database on %d partition(s) (e.g. partition's end offsets %v, "+
				"stored %v): the Kafka data was lost or this is another cluster", len(behind), behind, stored))
		}
		if len(deleted) > 0 {
			why = append(why, fmt.Sprintf("commands the engines never applied were deleted by retention (%s) on %d partition(s): %s; "+
				"no engine ran for longer than the retention, and those commands cannot be applied now", retention, len(deleted),
				gaps(stored, deleted)))
		}
		return fmt.Errorf("%s. Nothing was changed. If this is known and accepted, start once with "+
			"PAYSVC_ACCEPT_COMMAND_LOG_RESET=true to continue from where the log has records", strings.Join(why, "; "))
	}
	if len(behind) > 0 {
		log.Warn("command log behind the database: moving stored offsets to the log's end", "partitions", behind)
		if err := storage.ResetOffsets(ctx, db, topics.CommandsTopic, behind); err != nil {
			return err
		}
	}
	if len(deleted) > 0 {
		log.Error("commands deleted by retention before they were applied: moving stored offsets to the log's start",
			"gaps", gaps(stored, deleted), "retention", retention.String())
		return storage.ResetOffsets(ctx, db, topics.CommandsTopic, deleted)
	}
	return nil
}

// gaps names each partition's deleted offsets, "partition 2: offsets 10-41 (32 commands)".
func gaps(stored, start map[int32]int64) string {
	parts := make([]int32, 0, len(start))
	for p := range start {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	var out []string
	for _, p := range parts {
		out = append(out, fmt.Sprintf("partition %d: offsets %d-%d (%d commands)", p, stored[p], start[p]-1, start[p]-stored[p]))
	}
	return strings.Join(out, ", ")
}
