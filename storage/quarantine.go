package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// Quarantine is a command set aside: it is committed as processed with Reply (a
// refusal), the partition's offset moves past it, and the record is kept for an
// operator.
type Quarantine struct {
	Topic      string
	Partition  int32
	Epoch      int64
	Offset     int64
	CommandID  string
	MerchantID string
	Type       string
	ErrorCode  string
	Error      string
	Record     []byte
	Reply      []byte
}

// QuarantineCommand commits q in one transaction, fenced by the owner epoch like a
// batch. It returns the reply that now stands for the command: q.Reply, or the
// reply stored earlier if the command had been processed after all (never two).
func QuarantineCommand(ctx context.Context, db *sqlx.DB, q Quarantine) ([]byte, error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("quarantine: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `UPDATE partition_offsets SET next_offset = $4, updated_at = now()
		WHERE topic = $1 AND partition = $2 AND epoch = $3`, q.Topic, q.Partition, q.Epoch, q.Offset+1)
	if err != nil {
		return nil, fmt.Errorf("quarantine: offset: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("quarantine: offset: %w", err)
	} else if n != 1 {
		return nil, ErrFenced
	}
	reply := q.Reply
	var inserted string
	err = tx.QueryRowxContext(ctx, `INSERT INTO processed_commands (command_id, merchant_id, command_type, kafka_partition, kafka_offset, reply)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (command_id) DO NOTHING RETURNING command_id`,
		printable(q.CommandID, 200), printable(q.MerchantID, 200), printable(q.Type, 200), q.Partition, q.Offset, q.Reply).Scan(&inserted)
	if errors.Is(err, sql.ErrNoRows) {
		if err := tx.GetContext(ctx, &reply, `SELECT reply FROM processed_commands WHERE command_id = $1`, printable(q.CommandID, 200)); err != nil {
			return nil, fmt.Errorf("quarantine: stored reply: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("quarantine: processed: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO command_quarantine
		(topic, kafka_partition, kafka_offset, command_id, merchant_id, command_type, error_code, error, record)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`,
		q.Topic, q.Partition, q.Offset, printable(q.CommandID, 200), printable(q.MerchantID, 200), printable(q.Type, 200),
		printable(q.ErrorCode, 40), printable(q.Error, 2000), q.Record); err != nil {
		return nil, fmt.Errorf("quarantine: record: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("quarantine: commit: %w", err)
	}
	return reply, nil
}

// printable makes s storable as text whatever it holds: the quarantine must never
// fail for the very bytes that sent a command there.
func printable(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\\u0000")
	if r := []rune(s); len(r) > max {
		s = string(r[:max])
	}
	return s
}

// QuarantinedCommand is a row of the quarantine, for operators.
type QuarantinedCommand struct {
	Topic         string    `db:"topic" json:"topic"`
	Partition     int32     `db:"kafka_partition" json:"partition"`
	Offset        int64     `db:"kafka_offset" json:"offset"`
	CommandID     string    `db:"command_id" json:"command_id"`
	MerchantID    string    `db:"merchant_id" json:"merchant_id"`
	Type          string    `db:"command_type" json:"command_type"`
	ErrorCode     string    `db:"error_code" json:"error_code"`
	Error         string    `db:"error" json:"error"`
	QuarantinedAt time.Time `db:"quarantined_at" json:"quarantined_at"`
}

// QuarantinedCommands lists the newest quarantined commands, of one merchant when
// merchantID is set.
func QuarantinedCommands(ctx context.Context, q sqlx.QueryerContext, merchantID string, limit int) ([]QuarantinedCommand, error) {
	out := []QuarantinedCommand{}
	err := sqlx.SelectContext(ctx, q, &out, `SELECT topic, kafka_partition, kafka_offset, command_id, merchant_id, command_type,
		error_code, error, quarantined_at FROM command_quarantine
		WHERE $1 = '' OR merchant_id = $1 ORDER BY quarantined_at DESC, kafka_offset DESC LIMIT $2`, merchantID, limit)
	if err != nil {
		return nil, fmt.Errorf("quarantined commands: %w", err)
	}
	return out, nil
}
