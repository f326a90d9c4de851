package callback

import (
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The committed offset of a partition only ever covers callbacks finished in order:
// a later file's callback that finishes first does not let the commit pass an
// earlier one still being retried, and the count of pending callbacks follows.
func TestWatermarkCommitsOnlyTheFinishedPrefix(t *testing.T) {
	c := &consumer{lanes: map[string]*lane{}, parts: map[int32]*watermark{}}
	c.cond = sync.NewCond(&c.mu)
	w := &watermark{done: map[int64]bool{}}
	c.parts[0] = w
	recs := make([]*kgo.Record, 5)
	for i := range recs {
		recs[i] = &kgo.Record{Partition: 0, Offset: int64(10 + i)}
		w.recs = append(w.recs, recs[i])
		c.pending++
	}
	last := func() int64 {
		if w.last == nil {
			return -1
		}
		return w.last.Offset
	}
	for _, step := range []struct {
		finish int
		want   int64
	}{
		{1, -1}, // offset 11 done, 10 still out: nothing committable
		{3, -1}, // 13 done too
		{0, 11}, // 10 done: 10 and 11 form the prefix
		{2, 13}, // 12 done: the prefix runs through 13
		{4, 14},
	} {
		c.finish(item{recs[step.finish], w})
		if got := last(); got != step.want {
			t.Fatalf("after finishing offset %d the prefix ends at %d, want %d", recs[step.finish].Offset, got, step.want)
		}
	}
	if c.pending != 0 || len(w.done) != 0 || len(w.recs) != 0 {
		t.Fatalf("pending %d, done %v, recs %d: want all settled", c.pending, w.done, len(w.recs))
	}

	// A callback taken under an ownership that ended (the partition was revoked and
	// taken again) does not move the new tracking, nor the count forget settled.
	old := &watermark{done: map[int64]bool{}, recs: []*kgo.Record{{Partition: 1, Offset: 5}}}
	c.parts[1] = old
	c.pending = 1
	c.forget([]int32{1})
	fresh := &watermark{done: map[int64]bool{}, recs: []*kgo.Record{{Partition: 1, Offset: 5}}}
	c.parts[1] = fresh
	c.pending = 1
	c.finish(item{old.recs[0], old})
	if fresh.last != nil || c.pending != 1 {
		t.Fatalf("a stale callback moved the new tracking (last %v) or the count (%d)", fresh.last, c.pending)
	}
}
