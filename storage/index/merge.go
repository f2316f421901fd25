package index

// MergeKeys is the last step of Keys in both indexes: it appends to keys,
// in key order and once each, the keys at the heads of n sorted streams
// (a plan's lookups, or all keys) and of removed (sorted: keys that left
// the selection after the list's revision), up to limit keys in all (0:
// no limit), and returns keys. head(i) returns stream i's current key (ok
// false once it has none); next(i) moves stream i past it.
func MergeKeys(n int, head func(i int) (key string, ok bool), next func(i int), removed []string, limit int, keys []string) []string {
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
