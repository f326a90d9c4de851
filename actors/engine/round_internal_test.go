package engine

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/aggregates/wallet"
	"paysvc/storage"
)

// A round read for a partition before the seal, and the seal found the commit in
// flight failed and sought the partition back: the round's records are stale
// copies (the consumer brings them again from the committed offset) and are not
// applied. Applied, they would move the applied offset past records the failed
// batch had taken and skip them.
func TestRoundRecordsOfAPartitionSoughtBackSinceAreDropped(t *testing.T) {
	e := &Engine{log: slog.New(slog.NewTextHandler(io.Discard, nil)), kinds: registered{}}
	p := newPartition(0, 1, 10)
	rec := &kgo.Record{Offset: 10, Value: []byte("not a command")}
	reads := &pollReads{decodeErr: map[*kgo.Record]error{rec: io.ErrUnexpectedEOF}, done: map[string][]byte{}, doneTypes: map[string]string{}}
	rd := &round{reads: reads}
	rp := &roundPart{w: &work{recs: []*kgo.Record{rec}, hw: 11}, seeks: p.seeks}

	p.seeks++ // sought back after the round read
	if applied, _ := e.process(context.Background(), p, rp, rd, time.Now(), false); !applied {
		t.Fatal("stale records handed back to be held")
	}
	if p.next != 10 || p.open != nil {
		t.Fatalf("stale records applied: next %d, open batch %v", p.next, p.open != nil)
	}

	rp.seeks = p.seeks // read after the seek: current, applied
	e.process(context.Background(), p, rp, rd, time.Now(), false)
	if p.next != 11 || p.open == nil {
		t.Fatalf("current records not applied: next %d", p.next)
	}
}

// A preloaded snapshot is used only by the merchant that asked for its id, and
// only the ids the round did not read are left to read; a failed preload read
// nothing.
func TestPreloadServesOnlyWhatItReadForItsMerchant(t *testing.T) {
	pl := &preloaded{
		asked: map[string]bool{instKey("M1", "X"): true, instKey("M2", "X"): true, instKey("M1", "Y"): true},
		found: map[string]Snapshot{instKey("M1", "X"): {ID: "X", State: wallet.State{WalletID: "X", MerchantID: "M1"}}},
	}
	var want storage.Owned
	for _, k := range [][2]string{{"M1", "X"}, {"M2", "X"}, {"M1", "Y"}, {"M1", "Z"}} {
		want.Add(k[0], k[1])
	}
	var used []string
	found, rest := pl.split(want)
	for _, f := range found {
		s := f.snap.State.(wallet.State)
		used = append(used, s.MerchantID+"/"+s.WalletID)
	}
	if !reflect.DeepEqual(used, []string{"M1/X"}) {
		t.Errorf("used %v, want M1/X only (M2 asked for M1's id; Y did not exist)", used)
	}
	if !reflect.DeepEqual(rest, storage.Owned{Merchants: []string{"M1"}, IDs: []string{"Z"}}) {
		t.Errorf("left to read %+v, want M1/Z (not asked)", rest)
	}

	pl.err = context.DeadlineExceeded
	if found, rest := pl.split(want); len(rest.IDs) != 4 || found != nil {
		t.Errorf("a failed preload served %v and left %d of 4 to read", found, len(rest.IDs))
	}
	var none *preloaded
	if _, rest := none.split(want); len(rest.IDs) != 4 {
		t.Errorf("no preload left %d of 4 to read", len(rest.IDs))
	}
}
