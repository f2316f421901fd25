package index

import "container/heap"

// MergeKeys is the last step of Keys in both indexes: it appends to keys,
// in key order and once each, the keys at the heads of n sorted streams
// (a plan's lookups, or all keys) and of removed (sorted: keys that left
// the selection after the list's revision), up to limit keys in all (0:
// no limit), and returns keys. head(i) returns stream i's current key (ok
// false once it has none); next(i) moves stream i past it.
func MergeKeys(n int, head func(i int) (key string, ok bool), next func(i int), removed []string, limit int, keys []string) []string {
	if n > heapMergeMin {
		return mergeKeysHeap(n, head, next, removed, limit, keys)
	}
	heads := make([]string, n)
	valid := make([]bool, n)
	for i := range n {
		heads[i], valid[i] = head(i)
	}
	for limit <= 0 || len(keys) < limit {
		// The smallest key at the head of a stream; equal heads are one key.
		best, found := "", len(removed) > 0
		if found {
			best = removed[0]
		}
		for i, h := range heads {
			if valid[i] && (!found || h < best) {
				best, found = h, true
			}
		}
		if !found {
			break
		}
		keys = append(keys, best)
		if len(removed) > 0 && removed[0] == best {
			removed = removed[1:]
		}
		for i, h := range heads {
			if valid[i] && h == best {
				next(i)
				heads[i], valid[i] = head(i)
			}
		}
	}
	return keys
}

// heapMergeMin is the number of streams above which MergeKeys keeps them
// in a heap: a time range's lookups are a stream per minute bucket, and
// comparing every head for every key would cost O(streams) per key.
const heapMergeMin = 8

// mergeKeysHeap is MergeKeys over a heap of the streams' heads.
func mergeKeysHeap(n int, head func(i int) (key string, ok bool), next func(i int), removed []string, limit int, keys []string) []string {
	h := &keyHeap{}
	for i := range n {
		if k, ok := head(i); ok {
			h.items = append(h.items, keyHead{k, i})
		}
	}
	heap.Init(h)
	last, any := "", false
	for limit <= 0 || len(keys) < limit {
		var best string
		switch {
		case h.Len() > 0 && (len(removed) == 0 || h.items[0].key <= removed[0]):
			top := &h.items[0]
			best = top.key
			next(top.stream)
			if k, ok := head(top.stream); ok {
				top.key = k
				heap.Fix(h, 0)
			} else {
				heap.Pop(h)
			}
		case len(removed) > 0:
			best, removed = removed[0], removed[1:]
		default:
			return keys
		}
		if any && best == last {
			continue // a key in several streams, or also removed
		}
		keys = append(keys, best)
		last, any = best, true
	}
	return keys
}

type keyHead struct {
	key    string
	stream int
}

// keyHeap is a min-heap of stream heads by key.
type keyHeap struct{ items []keyHead }

func (h *keyHeap) Len() int           { return len(h.items) }
func (h *keyHeap) Less(i, j int) bool { return h.items[i].key < h.items[j].key }
func (h *keyHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *keyHeap) Push(x any)         { h.items = append(h.items, x.(keyHead)) }
func (h *keyHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
