package service

import "testing"

// The limit is the floor while the live heap is small and four times the live
// heap beyond: never a fixed ceiling a large live heap would press against.
func TestMemoryLimitFollowsTheLiveHeap(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int64
	}{
		{0, memoryFloor},
		{100 << 20, memoryFloor},
		{112 << 20, memoryFloor},
		{200 << 20, 800 << 20},
		{2 << 30, 8 << 30},
		{1 << 63, 4 << 60},
	} {
		if got := memoryLimit(c.live); got != c.want {
			t.Errorf("memoryLimit(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}
