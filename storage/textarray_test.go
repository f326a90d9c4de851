package storage_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/lib/pq"

	"paysvc/storage"
)

// Replies and event bodies travel as text (migration 0035) and are stored as the
// exact bytes the engine encoded, whatever JSON they hold: quotes, backslashes,
// escapes, array-literal punctuation, the word NULL, multi-byte characters, an
// empty body. Through both commit functions.
func TestRepliesAndBodiesStoredByteForByte(t *testing.T) {
	t.Parallel()
	tricky := [][]byte{
		[]byte(`{"a":"say \"hi\"","b":"C:\\path\\","c":"\u0000 and \n escaped"}`),
		[]byte(`{"x":"{,}","y":NULL,"z":"NULL"}`),
		[]byte(`{"name":"Wanjiku Njoroge — café ✓ 🚀","k":"\\\\\""}`),
		[]byte(`NULL`),
		[]byte(``),
		[]byte(` {"spaced": true} `),
	}
	for _, many := range []bool{false, true} {
		b := setupBatch(t)
		batch := firstBatch(b)
		batch.Processed, batch.Outbox = nil, nil
		for i, body := range tricky {
			id := string(rune('a' + i))
			batch.Processed = append(batch.Processed, storage.Processed{CommandID: "C" + id, MerchantID: "M1", Type: "t", Offset: int64(i), Reply: body})
			batch.Outbox = append(batch.Outbox, storage.OutboxEvent{EventID: "E" + id, Topic: "paysvc.events.x.v1", Key: "k", MerchantID: "M1", Body: body})
		}
		var err error
		if many {
			err = storage.CommitBatches(b.ctx, b.db, []storage.Batch{batch, secondPartition(t, b)})
		} else {
			err = storage.CommitBatch(b.ctx, b.db, batch)
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, body := range tricky {
			id := string(rune('a' + i))
			var reply, stored []byte
			if err := b.db.GetContext(b.ctx, &reply, `SELECT reply FROM processed_commands WHERE command_id = $1`, "C"+id); err != nil {
				t.Fatal(err)
			}
			if err := b.db.GetContext(b.ctx, &stored, `SELECT convert_to(x.body, 'UTF8') FROM outbox,
				unnest(event_ids, bodies) AS x(event_id, body) WHERE x.event_id = $1`, "E"+id); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(reply, body) || !bytes.Equal(stored, body) {
				t.Fatalf("many=%v: stored reply %q and body %q, want %q", many, reply, stored, body)
			}
		}
	}
}

// A reply that is not UTF-8 text (a NUL, an invalid byte) is refused by the
// database as a data error (class 22), which the engine treats as the command's
// own fault: it is set aside, the partition goes on. Nothing of the batch is
// written.
func TestReplyThatIsNotTextIsADataError(t *testing.T) {
	t.Parallel()
	for _, bad := range [][]byte{[]byte("{\"a\":\"\x00\"}"), []byte("{\"a\":\"\xff\xfe\"}")} {
		b := setupBatch(t)
		batch := firstBatch(b)
		batch.Processed[0].Reply = bad
		err := storage.CommitBatch(b.ctx, b.db, batch)
		var pqErr *pq.Error
		if !errors.As(err, &pqErr) || pqErr.Code.Class() != "22" {
			t.Fatalf("reply %q: err %v, want a class 22 data error", bad, err)
		}
		if got := counts(t, b.db); got != (tableCounts{}) {
			t.Fatalf("reply %q: rows written %+v", bad, got)
		}
	}
}
