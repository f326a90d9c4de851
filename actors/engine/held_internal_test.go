package engine

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Held records are applied at the seal only if their partition was not sought
// back after it handed them back: a later poll's apply can find the commit in
// flight failed and seek the partition back, and the held copies would then be
// taken for a gap in the log (the commands between them and the committed offset
// skipped). Partitions no longer owned, or dropped, are forgotten.
func TestCurrentDropsHeldRecordsOfPartitionsSoughtBackSince(t *testing.T) {
	e := &Engine{parts: map[int32]*partition{}}
	recs := func(from int64, seeks int64) *work {
		return &work{recs: []*kgo.Record{{Offset: from}, {Offset: from + 1}}, seeks: seeks}
	}
	e.parts[0] = newPartition(0, 1, 10) // handed back at seek count 0, never sought since
	e.parts[1] = newPartition(1, 1, 5)  // sought back since (count 1): its held 12.. are stale
	e.parts[1].seeks = 1
	e.parts[2] = newPartition(2, 1, 20) // dropped (revoked) since
	e.parts[2].dropped = true
	got := e.current(map[int32]*work{0: recs(10, 0), 1: recs(12, 0), 2: recs(20, 0), 3: recs(0, 0)})
	if len(got) != 1 || got[0] == nil || got[0].recs[0].Offset != 10 {
		t.Fatalf("kept %v, want partition 0 only", got)
	}
	// Held after the seek (tagged with its count): applied.
	if got := e.current(map[int32]*work{1: recs(5, 1)}); got[1] == nil {
		t.Fatal("records held after the seek were dropped")
	}
}
