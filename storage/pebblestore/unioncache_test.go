package pebblestore

import (
	"sync/atomic"
	"testing"
)

// TestUnionCacheBounds: a view keeps at most maxUnionCache lists of
// candidates, all views together at most maxUnionKeysKept candidates, and
// a closed view's candidates no longer count.
func TestUnionCacheBounds(t *testing.T) {
	var kept atomic.Int64
	a, b := &unionCache{}, &unionCache{}
	keys := make([]string, maxUnionKeysKept/2)
	a.put("one", keys, &kept)
	b.put("two", keys, &kept)
	b.put("three", []string{"x"}, &kept)
	if _, ok := b.get("three"); ok || kept.Load() != maxUnionKeysKept {
		t.Fatalf("past the bound of every view: kept %d, third list cached %v", kept.Load(), ok)
	}
	a.drop()
	b.put("three", []string{"x"}, &kept)
	if _, ok := b.get("three"); !ok || kept.Load() != maxUnionKeysKept/2+1 {
		t.Fatalf("after a view's drop: kept %d, third list cached %v", kept.Load(), ok)
	}
	for i := range maxUnionCache + 2 {
		b.put(string(rune('a'+i)), []string{"y"}, &kept)
	}
	if len(b.entries) != maxUnionCache {
		t.Fatalf("%d lists kept by one view, want %d", len(b.entries), maxUnionCache)
	}
	b.drop()
	if kept.Load() != 0 {
		t.Fatalf("%d candidates counted after every view dropped", kept.Load())
	}
}
