package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/actors/ledger"
	"paysvc/actors/wallet"
)

// ErrFenced means the partition's owner epoch moved on: another worker claimed the
// partition, and this worker's batch must not (and did not) commit.
var ErrFenced = errors.New("partition fenced: another worker owns it")

// ErrStaleSnapshot means a snapshot's version was not the one the worker started
// from: the batch rolled back and the worker must rehydrate.
var ErrStaleSnapshot = errors.New("stale wallet snapshot")

// ClaimPartition makes owner the partition's writer: it bumps the owner epoch (so
// any previous owner's next batch is fenced) and returns the epoch and the offset
// to resume from. A partition never seen before starts at offset 0.
func ClaimPartition(ctx context.Context, db *sqlx.DB, topic string, partition int32, owner string) (epoch, nextOffset int64, err error) {
	err = db.QueryRowxContext(ctx, `INSERT INTO partition_offsets (topic, partition, epoch, next_offset, owner)
		VALUES ($1, $2, 1, 0, $3)
		ON CONFLICT (topic, partition) DO UPDATE SET epoch = partition_offsets.epoch + 1, owner = $3, updated_at = now()
		RETURNING epoch, next_offset`, topic, partition, owner).Scan(&epoch, &nextOffset)
	if err != nil {
		return 0, 0, fmt.Errorf("claim partition %s/%d: %w", topic, partition, err)
	}
	return epoch, nextOffset, nil
}

// PartitionOffset reads the stored next offset of a partition (-1 if none).
func PartitionOffset(ctx context.Context, q sqlx.QueryerContext, topic string, partition int32) (int64, error) {
	var off int64
	err := sqlx.GetContext(ctx, q, &off, `SELECT next_offset FROM partition_offsets WHERE topic = $1 AND partition = $2`, topic, partition)
	if errors.Is(err, sql.ErrNoRows) {
		return -1, nil
	}
	return off, err
}

// WalletWrite is a snapshot to store. PrevVersion 0 inserts a new wallet; otherwise
// the row is updated only if it still has PrevVersion.
type WalletWrite struct {
	State       wallet.State
	PrevVersion int64
}

// Processed is a command applied in the batch, with its stored reply.
type Processed struct {
	CommandID  string
	MerchantID string
	Type       string
	Offset     int64
	Reply      []byte
}

// OutboxEvent is an event to publish after the commit.
type OutboxEvent struct {
	EventID    string
	Topic      string
	Key        string
	MerchantID string
	Body       []byte
}

// Batch is everything one partition worker commits at once.
type Batch struct {
	Topic      string
	Partition  int32
	Epoch      int64
	NextOffset int64
	At         time.Time
	Wallets    []WalletWrite
	Entries    []EntryWrite
	Processed  []Processed
	Outbox     []OutboxEvent
}

// EntryWrite is a ledger entry with the command that made it.
type EntryWrite struct {
	ledger.Entry
	CommandID string
}

// CommitBatch writes a batch in one transaction. The first statement advances the
// partition's offset only if the epoch is still ours, and holds that row's lock
// until commit, so a worker that lost the partition gets ErrFenced and writes
// nothing. Snapshot updates are version-checked.
func CommitBatch(ctx context.Context, db *sqlx.DB, b Batch) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("batch: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	res, err := tx.ExecContext(ctx, `UPDATE partition_offsets SET next_offset = $4, updated_at = now()
		WHERE topic = $1 AND partition = $2 AND epoch = $3`, b.Topic, b.Partition, b.Epoch, b.NextOffset)
	if err != nil {
		return fmt.Errorf("batch: offset: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrFenced
	}
	if err := writeWallets(ctx, tx, b); err != nil {
		return err
	}
	if err := writeEntries(ctx, tx, b); err != nil {
		return err
	}
	if err := writeProcessed(ctx, tx, b); err != nil {
		return err
	}
	if err := writeOutbox(ctx, tx, b); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("batch: commit: %w", err)
	}
	return nil
}

func writeWallets(ctx context.Context, tx *sqlx.Tx, b Batch) error {
	var ins, upd []WalletWrite
	for _, w := range b.Wallets {
		if w.PrevVersion == 0 {
			ins = append(ins, w)
		} else {
			upd = append(upd, w)
		}
	}
	if len(ins) > 0 {
		cols := walletArrays(ins)
		_, err := tx.ExecContext(ctx, `INSERT INTO wallets (wallet_id, merchant_id, currency, wallet_type, label,
			can_disburse, current_balance, available_balance, version, created_at, updated_at)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bool[],
				$7::numeric[], $8::numeric[], $9::bigint[], $10::timestamptz[], $11::timestamptz[])`,
			cols.ids, cols.merchants, cols.currencies, cols.types, cols.labels, cols.disburse,
			cols.current, cols.available, cols.versions, cols.created, cols.updated)
		if err != nil {
			return fmt.Errorf("batch: insert wallets: %w", err)
		}
	}
	if len(upd) > 0 {
		cols := walletArrays(upd)
		prev := make(pq.Int64Array, len(upd))
		for i, w := range upd {
			prev[i] = w.PrevVersion
		}
		res, err := tx.ExecContext(ctx, `UPDATE wallets w SET current_balance = v.cur, available_balance = v.avail,
			version = v.ver, updated_at = v.upd, label = v.label, can_disburse = v.disb
			FROM unnest($1::text[], $2::numeric[], $3::numeric[], $4::bigint[], $5::bigint[], $6::timestamptz[], $7::text[], $8::bool[])
				AS v(id, cur, avail, ver, prev, upd, label, disb)
			WHERE w.wallet_id = v.id AND w.version = v.prev`,
			cols.ids, cols.current, cols.available, cols.versions, prev, cols.updated, cols.labels, cols.disburse)
		if err != nil {
			return fmt.Errorf("batch: update wallets: %w", err)
		}
		if n, _ := res.RowsAffected(); n != int64(len(upd)) {
			return ErrStaleSnapshot
		}
	}
	return nil
}

type walletCols struct {
	ids, merchants, currencies, types, labels, current, available, created, updated pq.StringArray
	disburse                                                                        pq.BoolArray
	versions                                                                        pq.Int64Array
}

func walletArrays(ws []WalletWrite) walletCols {
	var c walletCols
	for _, w := range ws {
		s := w.State
		c.ids = append(c.ids, s.WalletID)
		c.merchants = append(c.merchants, s.MerchantID)
		c.currencies = append(c.currencies, s.Currency)
		c.types = append(c.types, s.WalletType)
		c.labels = append(c.labels, s.Label)
		c.disburse = append(c.disburse, s.CanDisburse)
		c.current = append(c.current, s.CurrentBalance.String())
		c.available = append(c.available, s.AvailableBalance.String())
		c.versions = append(c.versions, s.Version)
		c.created = append(c.created, s.CreatedAt.UTC().Format(time.RFC3339Nano))
		c.updated = append(c.updated, s.UpdatedAt.UTC().Format(time.RFC3339Nano))
	}
	return c
}

func writeEntries(ctx context.Context, tx *sqlx.Tx, b Batch) error {
	if len(b.Entries) == 0 {
		return nil
	}
	n := len(b.Entries)
	txn, cmd, merchant, account, wal, cur, amt, rb, tt, narr := make(pq.StringArray, n), make(pq.StringArray, n),
		make(pq.StringArray, n), make(pq.StringArray, n), make(pq.StringArray, n), make(pq.StringArray, n),
		make(pq.StringArray, n), make(pq.StringArray, n), make(pq.StringArray, n), make(pq.StringArray, n)
	for i, e := range b.Entries {
		txn[i], cmd[i], merchant[i], account[i] = e.TransactionID, e.CommandID, e.MerchantID, e.Account
		wal[i], cur[i], amt[i], tt[i], narr[i] = e.WalletID, e.Currency, e.Amount.String(), e.TransType, e.Narrative
		if e.RunningBalance != nil {
			rb[i] = e.RunningBalance.String()
		}
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO ledger_entries (transaction_id, command_id, merchant_id, account, wallet_id,
		currency, amount, running_balance, trans_type, narrative, created_at)
		SELECT t, c, m, a, NULLIF(w, ''), cu, am::numeric, NULLIF(r, '')::numeric, tt, n, $11
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[])
			AS v(t, c, m, a, w, cu, am, r, tt, n)`,
		txn, cmd, merchant, account, wal, cur, amt, rb, tt, narr, b.At)
	if err != nil {
		return fmt.Errorf("batch: insert entries: %w", err)
	}
	return nil
}

func writeProcessed(ctx context.Context, tx *sqlx.Tx, b Batch) error {
	if len(b.Processed) == 0 {
		return nil
	}
	n := len(b.Processed)
	ids, merchants, types := make(pq.StringArray, n), make(pq.StringArray, n), make(pq.StringArray, n)
	offsets := make(pq.Int64Array, n)
	replies := make(pq.ByteaArray, n)
	for i, p := range b.Processed {
		ids[i], merchants[i], types[i], offsets[i], replies[i] = p.CommandID, p.MerchantID, p.Type, p.Offset, p.Reply
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO processed_commands (command_id, merchant_id, command_type, kafka_partition, kafka_offset, reply)
		SELECT i, m, t, $4, o, r FROM unnest($1::text[], $2::text[], $3::text[], $5::bigint[], $6::bytea[]) AS v(i, m, t, o, r)`,
		ids, merchants, types, b.Partition, offsets, replies)
	if err != nil {
		return fmt.Errorf("batch: insert processed: %w", err)
	}
	return nil
}

func writeOutbox(ctx context.Context, tx *sqlx.Tx, b Batch) error {
	if len(b.Outbox) == 0 {
		return nil
	}
	n := len(b.Outbox)
	ids, topics, keys, merchants := make(pq.StringArray, n), make(pq.StringArray, n), make(pq.StringArray, n), make(pq.StringArray, n)
	bodies := make(pq.ByteaArray, n)
	for i, e := range b.Outbox {
		ids[i], topics[i], keys[i], merchants[i], bodies[i] = e.EventID, e.Topic, e.Key, e.MerchantID, e.Body
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO outbox (event_id, topic, record_key, merchant_id, body)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bytea[])`,
		ids, topics, keys, merchants, bodies)
	if err != nil {
		return fmt.Errorf("batch: insert outbox: %w", err)
	}
	return nil
}

// ProcessedReplies returns the stored replies of those ids that were already applied.
func ProcessedReplies(ctx context.Context, q sqlx.QueryerContext, ids []string) (map[string][]byte, error) {
	rows, err := q.QueryxContext(ctx, `SELECT command_id, reply FROM processed_commands WHERE command_id = ANY($1)`, pq.StringArray(ids))
	if err != nil {
		return nil, fmt.Errorf("processed replies: %w", err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var id string
		var reply []byte
		if err := rows.Scan(&id, &reply); err != nil {
			return nil, err
		}
		out[id] = reply
	}
	return out, rows.Err()
}

// ProcessedReply returns the stored reply of one of the merchant's commands.
func ProcessedReply(ctx context.Context, q sqlx.QueryerContext, merchantID, commandID string) ([]byte, bool, error) {
	var reply []byte
	err := sqlx.GetContext(ctx, q, &reply, `SELECT reply FROM processed_commands WHERE command_id = $1 AND merchant_id = $2`, commandID, merchantID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("processed reply: %w", err)
	}
	return reply, true, nil
}
