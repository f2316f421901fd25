package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMergeKeysHeap: with more streams than heapMergeMin, MergeKeys (on a
// heap) returns what a sort of every stream's keys and the removed ones
// does, each key once, up to each limit.
func TestMergeKeysHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		n := heapMergeMin + 1 + r.IntN(40)
		streams := make([][]string, n)
		var all []string
		for i := range streams {
			for range r.IntN(30) {
				streams[i] = append(streams[i], fmt.Sprintf("ns/%03d", r.IntN(300)))
			}
			slices.Sort(streams[i])
			streams[i] = slices.Compact(streams[i])
			all = append(all, streams[i]...)
		}
		var removed []string
		for range r.IntN(10) {
			removed = append(removed, fmt.Sprintf("ns/%03d", r.IntN(300)))
		}
		slices.Sort(removed)
		removed = slices.Compact(removed)
		all = append(all, removed...)
		slices.Sort(all)
		all = slices.Compact(all)
		limit := 0
		if round%2 == 1 {
			limit = 1 + r.IntN(len(all)+1)
		}
		at := make([]int, n)
		got := MergeKeys(n, func(i int) (string, bool) {
			if at[i] < len(streams[i]) {
				return streams[i][at[i]], true
			}
			return "", false
		}, func(i int) { at[i]++ }, removed, limit, nil)
		want := all
		if limit > 0 && limit < len(all) {
			want = all[:limit]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: %d streams, limit %d: got %v, want %v", round, n, limit, got, want)
		}
	}
}
