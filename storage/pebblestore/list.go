package pebblestore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/index"
	corev1 "k8s.io/api/core/v1"
)

// continueToken is what a continue string encodes: the revision the list
// is served at (-1: whatever is current) and the last key returned. A
// list whose selector selects all events of its scope also carries the
// number of events in the scope at that revision and how many the pages
// so far returned, whose difference is the remaining item count; tokens
// without them (older ones, inconsistent continuations) give none.
type continueToken struct {
	Version  string `json:"v"`
	Rev      int64  `json:"rv"`
	Key      string `json:"k"`
	Total    int64  `json:"t,omitempty"`
	Returned int64  `json:"n,omitempty"`
}

const continueVersion = "kubevents.io/v1"

func encodeContinue(rev int64, key string) string {
	return continueToken{Rev: rev, Key: key}.encode()
}

func (t continueToken) encode() string {
	t.Version = continueVersion
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return t, fmt.Errorf("%w: %v", storage.ErrInvalidContinue, err)
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("%w: %v", storage.ErrInvalidContinue, err)
	}
	if t.Version != continueVersion {
		return t, fmt.Errorf("%w: unknown token version %q", storage.ErrInvalidContinue, t.Version)
	}
	if t.Rev == 0 || t.Rev < -1 || t.Key == "" || bytes.IndexByte([]byte(t.Key), '/') < 0 || t.Total < 0 || t.Returned < 0 {
		return t, fmt.Errorf("%w: malformed token", storage.ErrInvalidContinue)
	}
	return t, nil
}

// List implements storage.Interface.
func (s *Store) List(ctx context.Context, opts storage.ListOptions) (*storage.ListResult, error) {
	v, tok, err := s.listView(opts)
	if err != nil {
		return nil, err
	}
	defer s.release(v)
	var encoded *[]storage.Encoded
	if opts.WithProtobuf {
		encoded = new([]storage.Encoded)
	}
	items, last, more, err := s.scan(ctx, v, opts.Selector, tok.Key, opts.Limit, encoded)
	if err != nil {
		return nil, err
	}
	res := &storage.ListResult{Items: items, Revision: v.rev}
	if encoded != nil {
		res.Protobuf = *encoded
	}
	if more {
		next := continueToken{Rev: v.rev, Key: last}
		if tok.Total > 0 {
			// Every page is served from the first page's snapshot: what
			// it counted less what the pages returned remains.
			next.Total, next.Returned = tok.Total, tok.Returned+int64(len(items))
			if remaining := next.Total - next.Returned; remaining > 0 {
				res.RemainingItemCount = &remaining
			}
		}
		res.Continue = next.encode()
		s.retain(v)
	}
	return res, nil
}

// storedCount is the number of events stored in v, kept at each revision.
func storedCount(v *view) (int64, error) {
	val, closer, err := v.snap.Get(metaCount)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pebblestore: list: %w", err)
	}
	defer closer.Close()
	if len(val) != 8 {
		return 0, fmt.Errorf("pebblestore: corrupt %s", metaCount)
	}
	return int64(binary.BigEndian.Uint64(val)), nil
}

// listView picks the snapshot a list is served from, and returns the
// continue token it resumes. A first page gets a token whose Total is the
// number of events in the list's scope in the snapshot, when its
// selector selects them all and that count is at hand: the store's count
// for all namespaces, the count published with the newest view for one
// (a list at an older exact revision gets none).
func (s *Store) listView(opts storage.ListOptions) (*view, continueToken, error) {
	if opts.Continue != "" {
		tok, err := decodeContinue(opts.Continue)
		if err != nil {
			return nil, tok, err
		}
		if tok.Rev == -1 {
			// Another snapshot than the one counted: no count.
			v, err := s.acquire()
			return v, continueToken{Key: tok.Key}, err
		}
		v, err := s.acquireAt(tok.Rev)
		if err != nil {
			return nil, tok, err
		}
		if v == nil {
			if tok.Rev > s.Revision() {
				return nil, tok, fmt.Errorf("%w: revision %d is in the future", storage.ErrInvalidContinue, tok.Rev)
			}
			return nil, tok, &storage.ContinueExpiredError{Inconsistent: encodeContinue(-1, tok.Key)}
		}
		return v, tok, nil
	}
	var tok continueToken
	counting := opts.Selector.SelectsAll()
	v, n, err := s.acquireCounting(opts.Selector.Namespace)
	if err != nil {
		return nil, tok, err
	}
	if opts.Revision > 0 {
		switch {
		case opts.Revision > v.rev:
			s.release(v)
			return nil, tok, fmt.Errorf("revision %d, current %d: %w", opts.Revision, v.rev, storage.ErrFutureRevision)
		case opts.Exact && opts.Revision != v.rev:
			s.release(v)
			old, err := s.acquireAt(opts.Revision)
			if err != nil {
				return nil, tok, err
			}
			if old == nil {
				return nil, tok, fmt.Errorf("revision %d: %w", opts.Revision, storage.ErrCompacted)
			}
			if counting && opts.Selector.Namespace == "" {
				if tok.Total, err = storedCount(old); err != nil {
					s.release(old)
					return nil, tok, err
				}
			}
			return old, tok, nil
		}
	}
	switch {
	case !counting:
	case opts.Selector.Namespace != "":
		tok.Total = n
	default:
		if tok.Total, err = storedCount(v); err != nil {
			s.release(v)
			return nil, tok, err
		}
	}
	return v, tok, nil
}

// keyScope is the range [from, to) of "<ns>/<name>" keys a list reads
// (an empty to: no upper bound): one namespace's, or some clusters' of a
// fleet (storage.Clusters.KeyRange), or every key.
type keyScope struct{ from, to string }

// scopeOf returns the keys of namespace ns when it is set, and otherwise
// those of the clusters c selects.
func scopeOf(ns string, c storage.Clusters) keyScope {
	if ns != "" {
		return keyScope{ns + "/", string(prefixEnd([]byte(ns + "/")))}
	}
	from, to := c.KeyRange()
	return keyScope{from, to}
}

// contains reports whether key ("<ns>/<name>") is in the scope.
func (k keyScope) contains(key []byte) bool {
	return string(key) >= k.from && (k.to == "" || string(key) < k.to)
}

// String identifies the scope in a cache key: no namespace holds 0x00 or
// 0x01, nor does a bound of a range of them.
func (k keyScope) String() string {
	if k.from == "" && k.to == "" {
		return ""
	}
	return k.from + "\x01" + k.to
}

// bounds returns the iterator bounds of the keys under prefix, within
// scope k, and the key to seek to: the first key after prefix+after when
// after is set and that falls within the bounds.
func bounds(prefix []byte, k keyScope, after string) (lower, upper, seek []byte) {
	lower = append(bytes.Clone(prefix), k.from...)
	if k.to == "" {
		upper = prefixEnd(prefix)
	} else {
		upper = append(bytes.Clone(prefix), k.to...)
	}
	seek = lower
	if after != "" {
		if s := append(append(bytes.Clone(prefix), after...), 0); bytes.Compare(s, lower) > 0 {
			seek = s
		}
	}
	return lower, upper, seek
}

// unionKeys returns the sorted, distinct "<ns>/<name>" suffixes after
// the given one that the lookups hold, within scope ns: the
// candidates of an involves query or of a family (two lookups per
// member's name), O(its matches). One iterator serves every lookup, each a
// seek forward in key order: a family's hundreds of lookups share its
// blocks (its members' names are neighbours in the name indexes), where
// an iterator each loaded every level's index blocks again.
func unionKeys(ctx context.Context, v *view, kept *atomic.Int64, p index.Plan, ns keyScope, after string, rangeCap int) ([]string, error) {
	// A list's pages are served at one view: its candidates after a later
	// page's start are the tail of those its first page read and kept. A
	// later page without them (too many to keep, or pushed out) reads
	// from its start.
	all, wide, ok := v.unions.find(func(key string) bool { return isUnionCacheKey(key, p, ns) })
	if wide {
		// An earlier page found the range too wide at this view: the
		// later pages scan at once rather than read the range again
		// (a summary's thousand pages would each read 65,536 entries).
		return nil, errRangeTooWide
	}
	if !ok {
		var err error
		if p.Range != nil {
			all, err = readRange(ctx, v, *p.Range, ns, after, rangeCap)
			if errors.Is(err, errRangeTooWide) {
				v.unions.putWide(unionCacheKey(p, ns), kept)
			}
		} else {
			all, err = readUnion(ctx, v, p.Lookups, ns, after)
		}
		if err != nil || after != "" {
			return all, err
		}
		if len(all) <= maxUnionCacheKeys {
			v.unions.put(unionCacheKey(p, ns), all, kept)
		}
		return all, nil
	}
	i, found := slices.BinarySearch(all, after)
	if found {
		i++
	}
	return all[i:], nil
}

// maxUnionCache bounds the candidate lists a view keeps: a few lists
// paginated at once at one revision (a view is shared by the lists served
// at its revision), each list's candidates once; maxUnionCacheKeys the
// candidates of one (a larger list runs its lookups again at each page
// rather than hold them for the view's life); and maxUnionKeysKept those
// of every view together (retained views are many: Options.MaxListSnapshots),
// about 50 MiB of keys at most.
const (
	maxUnionCache     = 4
	maxUnionCacheKeys = 1 << 16
	maxUnionKeysKept  = 1 << 20
)

// unionCache is a view's small cache of multi-lookup candidates, by plan;
// kept counts the candidates of every view's cache (Store.unionKeysKept).
type unionCache struct {
	mu      sync.Mutex
	entries []unionEntry
	kept    *atomic.Int64
}

type unionEntry struct {
	key  string
	keys []string
	// wide marks a time range found too wide for the index at this view
	// (keys is nil): its later pages scan.
	wide bool
}

func (c *unionCache) get(key string) ([]string, bool) {
	keys, _, ok := c.find(func(k string) bool { return k == key })
	return keys, ok
}

// find returns the candidates kept under the first key that is accepts,
// or whether that key's range was found too wide.
func (c *unionCache) find(is func(key string) bool) (keys []string, wide, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if is(e.key) {
			return e.keys, e.wide, true
		}
	}
	return nil, false, false
}

// putWide marks key's range too wide for the index at this view.
func (c *unionCache) putWide(key string, kept *atomic.Int64) {
	c.put(key, nil, kept)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.entries {
		if c.entries[i].key == key {
			c.entries[i].wide = true
		}
	}
}

// put keeps keys under key, unless every view's caches hold too many
// candidates already.
func (c *unionCache) put(key string, keys []string, kept *atomic.Int64) {
	n := int64(len(keys))
	if kept.Add(n) > maxUnionKeysKept {
		kept.Add(-n)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kept = kept
	if len(c.entries) == maxUnionCache {
		kept.Add(-int64(len(c.entries[0].keys)))
		c.entries = c.entries[1:]
	}
	c.entries = append(c.entries, unionEntry{key: key, keys: keys})
}

// drop forgets the cache's candidates, when its view is closed.
func (c *unionCache) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		c.kept.Add(-int64(len(e.keys)))
	}
	c.entries = nil
}

// unionCacheKey identifies a multi-lookup or range plan within a scope.
func unionCacheKey(p index.Plan, ns keyScope) string {
	var b strings.Builder
	b.WriteString(ns.String())
	if r := p.Range; r != nil {
		// Bucket values hold no zero byte (index.Bucket): 0x00 0x01
		// tells a range from the lookups, whose ID bytes are letters.
		b.WriteString("\x00\x01")
		b.WriteByte(byte(r.ID))
		b.WriteString(r.From)
		b.WriteByte(0)
		b.WriteString(r.To)
	}
	for _, l := range p.Lookups {
		b.WriteByte(0)
		b.WriteByte(byte(l.ID))
		b.WriteString(l.Value)
	}
	return b.String()
}

// isUnionCacheKey reports whether key is unionCacheKey(p, ns), without
// building it for lookups: each page of a family's list looks its
// candidates up, and building the key of its hundreds of lookups was a
// sixth of what the list allocated. (A range's key is short.)
func isUnionCacheKey(key string, p index.Plan, ns keyScope) bool {
	if p.Range != nil {
		return key == unionCacheKey(p, ns)
	}
	rest, ok := strings.CutPrefix(key, ns.String())
	for _, l := range p.Lookups {
		if !ok || len(rest) < 2+len(l.Value) || rest[0] != 0 || rest[1] != byte(l.ID) {
			return false
		}
		rest, ok = strings.CutPrefix(rest[2:], l.Value)
	}
	return ok && rest == ""
}

// readUnion reads the candidates of lookups after the given key.
func readUnion(ctx context.Context, v *view, lookups []index.Lookup, ns keyScope, after string) ([]string, error) {
	type span struct{ prefix, upper, seek []byte }
	spans := make([]span, len(lookups))
	for i, l := range lookups {
		prefix := indexPrefix(l.ID, l.Value)
		_, upper, seek := bounds(prefix, ns, after)
		spans[i] = span{prefix, upper, seek}
	}
	slices.SortFunc(spans, func(a, b span) int { return bytes.Compare(a.seek, b.seek) })
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIndex}, UpperBound: []byte{prefixIndex + 1}})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: list: %w", err)
	}
	defer it.Close()
	seen := map[string]bool{}
	var out []string
	for i, sp := range spans {
		if i%64 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		for ok := it.SeekGE(sp.seek); ok && bytes.Compare(it.Key(), sp.upper) < 0; ok = it.Next() {
			if len(out)%1024 == 1023 && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			sfx := string(it.Key()[len(sp.prefix):])
			if !seen[sfx] {
				seen[sfx] = true
				out = append(out, sfx)
			}
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("pebblestore: list: %w", err)
	}
	slices.Sort(out)
	return out, nil
}

// scan returns up to limit events matching sel whose "<ns>/<name>" is after
// the given one, reading an index when one applies, so that the cost is in
// the number of candidates, not of stored events. With encoded, a list
// over several lookups (scanKeys) sets it to the items' protobuf
// (storage.ListResult.Protobuf); others leave it nil.
func (s *Store) scan(ctx context.Context, v *view, sel storage.Selector, after string, limit int64, encoded *[]storage.Encoded) (items []*corev1.Event, last string, more bool, err error) {
	p := s.planSet().Plan(sel)
	if p.None {
		return nil, "", false, nil
	}
	ns := scopeOf(p.Namespace, sel.Clusters)
	if p.Name != "" {
		// A single key: kubectl delete --wait and describe-style lookups.
		if after != "" {
			return nil, "", false, nil
		}
		ev, err := getObject(v.snap, p.Namespace, p.Name)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, "", false, nil
		}
		if err != nil || !sel.Matches(ev) {
			return nil, "", false, err
		}
		return []*corev1.Event{ev}, "", false, nil
	}
	if len(p.Lookups) > 1 || p.Range != nil {
		items, last, more, err = s.scanKeys(ctx, v, sel, p, ns, after, limit, encoded)
		if !errors.Is(err, errRangeTooWide) {
			return items, last, more, err
		}
		p.Range = nil // served by a scan of the objects below
	}
	indexed := len(p.Lookups) == 1
	prefix := []byte{prefixObject}
	if indexed {
		prefix = indexPrefix(p.Lookups[0].ID, p.Lookups[0].Value)
	}
	lower, upper, seek := bounds(prefix, ns, after)
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, "", false, fmt.Errorf("pebblestore: list: %w", err)
	}
	defer it.Close()
	n := 0
	for ok := it.SeekGE(seek); ok; ok = it.Next() {
		if n++; n%1024 == 0 && ctx.Err() != nil {
			return nil, "", false, ctx.Err()
		}
		if limit > 0 && int64(len(items)) >= limit {
			return items, last, true, nil
		}
		sfx := it.Key()[len(prefix):]
		var ev *corev1.Event
		if indexed {
			evNS, evName, ok := splitSuffix(sfx)
			if !ok {
				continue
			}
			ev, err = getObjectVia(s.decoded, v.snap, evNS, evName)
			if errors.Is(err, storage.ErrNotFound) {
				s.log.Error("index entry without object", "key", string(it.Key()))
				continue
			}
		} else {
			var val []byte
			if val, err = it.ValueAndErr(); err == nil {
				ev, _, err = decodeObject(val)
			}
		}
		if err != nil {
			return nil, "", false, err
		}
		if sel.Matches(ev) {
			items = append(items, ev)
			last = string(sfx)
		}
	}
	if err := it.Error(); err != nil {
		return nil, "", false, fmt.Errorf("pebblestore: list: %w", err)
	}
	return items, last, false, nil
}

// scanKeys is scan over the union of several index lookups, or of a
// range lookup (errRangeTooWide when it holds more candidates than
// rangeCap allows the list). The
// candidates are read with one iterator over the objects, seeking forward
// in key order, rather than a point read each. With encoded, it sets
// it to each item's protobuf, without bytes for one whose stored form it
// could not splice (its Marshal encodes it then).
func (s *Store) scanKeys(ctx context.Context, v *view, sel storage.Selector, p index.Plan, ns keyScope, after string, limit int64, encoded *[]storage.Encoded) (items []*corev1.Event, last string, more bool, err error) {
	keys, err := unionKeys(ctx, v, &s.unionKeysKept, p, ns, after, s.rangeCap(limit))
	if err != nil || len(keys) == 0 {
		return nil, "", false, err
	}
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixObject}, UpperBound: []byte{prefixObject + 1}})
	if err != nil {
		return nil, "", false, fmt.Errorf("pebblestore: list: %w", err)
	}
	defer it.Close()
	var key []byte
	positioned := false
	for i, k := range keys {
		if limit > 0 && int64(len(items)) >= limit {
			return items, last, i < len(keys), nil
		}
		if i%1024 == 1023 && ctx.Err() != nil {
			return nil, "", false, ctx.Err()
		}
		key = append(append(key[:0], prefixObject), k...)
		positioned = seekForward(it, key, positioned)
		if !positioned || !bytes.Equal(it.Key(), key) {
			continue // deleted since the index entry was read: not in this snapshot
		}
		val, err := it.ValueAndErr()
		if err != nil {
			return nil, "", false, fmt.Errorf("pebblestore: list: %w", err)
		}
		ev, b, err := s.decoded.read(key[1:], val, encoded != nil)
		if err != nil {
			return nil, "", false, err
		}
		if sel.Matches(ev) {
			items = append(items, ev)
			last = k
			if encoded != nil {
				*encoded = append(*encoded, storage.Encoded{Of: ev, Bytes: b})
			}
		}
	}
	if err := it.Error(); err != nil {
		return nil, "", false, fmt.Errorf("pebblestore: list: %w", err)
	}
	return items, last, false, nil
}

// nextsBeforeSeek is how many keys seekForward steps over before it
// seeks.
const nextsBeforeSeek = 4

// seekForward positions it at the first key >= key, where key is after
// every key it was asked for before (positioned: it is at a key): a few
// steps of Next first, then a seek. A list's candidates are mostly
// neighbours (a family's members' events sort by the members' names,
// each object's events together), and a step costs a fraction of a
// seek, which searches every level of the tree again (a quarter of a
// family query's CPU). It reports whether it is at a key.
func seekForward(it *pebble.Iterator, key []byte, positioned bool) bool {
	if positioned {
		if bytes.Compare(it.Key(), key) >= 0 {
			return true // an absent earlier key left it here
		}
		for range nextsBeforeSeek {
			if !it.Next() {
				return false
			}
			if bytes.Compare(it.Key(), key) >= 0 {
				return true
			}
		}
	}
	return it.SeekGE(key)
}
