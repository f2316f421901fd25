package pebblestore

import (
	"sync/atomic"
	"testing"

	"github.com/kubevents/kubevents/storage/index"
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

// TestIsUnionCacheKey: a kept list's key is recognized from its lookups
// and namespace exactly when unionCacheKey gives that key.
func TestIsUnionCacheKey(t *testing.T) {
	l := func(id byte, v string) index.Lookup { return index.Lookup{ID: index.ID(id), Value: v} }
	plans := []struct {
		ns      string
		lookups []index.Lookup
	}{
		{"", nil},
		{"ns", nil},
		{"ns", []index.Lookup{l(1, "web")}},
		{"ns", []index.Lookup{l(2, "web")}},
		{"ns", []index.Lookup{l(1, "we")}},
		{"ns", []index.Lookup{l(1, "web"), l(2, "web")}},
		{"ns", []index.Lookup{l(1, "web"), l(2, "web-1")}},
		{"n", []index.Lookup{l(1, "web"), l(2, "web")}},
		{"ns", []index.Lookup{l(1, "web"), l(2, "")}},
		{"ns", []index.Lookup{l(1, ""), l(2, "web")}},
	}
	for i, a := range plans {
		key := unionCacheKey(a.lookups, a.ns)
		for j, b := range plans {
			if got, want := isUnionCacheKey(key, b.lookups, b.ns), key == unionCacheKey(b.lookups, b.ns); got != want {
				t.Errorf("plan %d's key against plan %d: %v, want %v", i, j, got, want)
			}
		}
	}
}
