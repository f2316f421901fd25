package pebblestore

import (
	"sync/atomic"
	"testing"

	"github.com/kubevents/kubevents/storage"
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

// TestIsUnionCacheKey: a kept list's key is recognized from its plan
// (lookups or a time range) and namespace exactly when unionCacheKey
// gives that key.
func TestIsUnionCacheKey(t *testing.T) {
	l := func(id byte, v string) index.Lookup { return index.Lookup{ID: index.ID(id), Value: v} }
	lk := func(ls ...index.Lookup) index.Plan { return index.Plan{Lookups: ls} }
	rg := func(from, to string) index.Plan {
		return index.Plan{Range: &index.Range{ID: index.LastObserved, From: from, To: to}}
	}
	plans := []struct {
		ns   string
		plan index.Plan
	}{
		{"", lk()},
		{"ns", lk()},
		{"ns", lk(l('n', "web"))},
		{"ns", lk(l('N', "web"))},
		{"ns", lk(l('n', "we"))},
		{"ns", lk(l('n', "web"), l('N', "web"))},
		{"ns", lk(l('n', "web"), l('N', "web-1"))},
		{"n", lk(l('n', "web"), l('N', "web"))},
		{"ns", lk(l('n', "web"), l('N', ""))},
		{"ns", lk(l('n', ""), l('N', "web"))},
		{"ns", rg("a", "b")},
		{"ns", rg("a", "c")},
		{"", rg("a", "b")},
	}
	for i, a := range plans {
		key := unionCacheKey(a.plan, scopeOf(a.ns, storage.Clusters{}))
		for j, b := range plans {
			if got, want := isUnionCacheKey(key, b.plan, scopeOf(b.ns, storage.Clusters{})), key == unionCacheKey(b.plan, scopeOf(b.ns, storage.Clusters{})); got != want {
				t.Errorf("plan %d's key against plan %d: %v, want %v", i, j, got, want)
			}
		}
	}
}
