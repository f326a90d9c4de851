package storage

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// StoredOffsets returns the stored next offset of every partition of a topic.
func StoredOffsets(ctx context.Context, q sqlx.QueryerContext, topic string) (map[int32]int64, error) {
	rows, err := q.QueryxContext(ctx, `SELECT partition, next_offset FROM partition_offsets WHERE topic = $1`, topic)
	if err != nil {
		return nil, fmt.Errorf("stored offsets: %w", err)
	}
	defer rows.Close()
	out := map[int32]int64{}
	for rows.Next() {
		var p int32
		var off int64
		if err := rows.Scan(&p, &off); err != nil {
			return nil, err
		}
		out[p] = off
	}
	return out, rows.Err()
}

// ResetOffsets moves the stored offsets of a topic's partitions to the given ones.
// Only for a command log that was lost: commands already applied are still
// recognised by their ids if they come again.
func ResetOffsets(ctx context.Context, ext sqlx.ExtContext, topic string, offsets map[int32]int64) error {
	for p, off := range offsets {
		if _, err := ext.ExecContext(ctx, `UPDATE partition_offsets SET next_offset = $3, epoch = epoch + 1, updated_at = now()
			WHERE topic = $1 AND partition = $2`, topic, p, off); err != nil {
			return fmt.Errorf("reset offset %d: %w", p, err)
		}
	}
	return nil
}
