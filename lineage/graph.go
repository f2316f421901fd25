package lineage

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubevents/kubevents/storage"
	"k8s.io/utils/clock"
)

// Defaults of Options.
const (
	// DefaultSpace is the RecordStore space of the graph's records.
	DefaultSpace = "lineage"
	// DefaultFlushInterval is how often Run writes what changed: at most
	// a second of learned ownership is lost to kill -9, and the source's
	// relist at the next start learns it again.
	DefaultFlushInterval = time.Second
	// DefaultCollectInterval is how often Run drops the objects no kept
	// event needs: each pass asks the store about every deleted object, so
	// it runs seldom, and keeping an object a little longer costs nothing
	// but its record.
	DefaultCollectInterval = 10 * time.Minute
	// DefaultCollectGrace is how long a deleted object is kept whatever
	// the store holds: events about an object still arrive for a while
	// after its deletion (the kubelet's Killing, a mirror catching up).
	DefaultCollectGrace = time.Hour
	// maxDepth bounds walks up and down ownership: real chains are short
	// (CronJob, Job, Pod), and owner references may form cycles.
	maxDepth = 16
	// flushChunk bounds the writes of one SaveRecords: on etcd, a save of
	// at most 128 writes is one transaction, all or none.
	flushChunk = 128
)

// Options configure a Graph. The zero value of each field takes its
// default.
type Options struct {
	// Store keeps the graph across restarts; nil keeps it in memory only.
	Store RecordStore
	// Space is the store's record space; default DefaultSpace.
	Space string
	// Clock gives the time of learned facts and drives Run.
	Clock clock.WithTicker
	// Log receives what the graph could not read or write.
	Log *slog.Logger
	// FlushInterval, CollectInterval and CollectGrace: see their defaults.
	FlushInterval, CollectInterval, CollectGrace time.Duration
	// Events tells Collect whether an object still has events; nil keeps
	// every object.
	Events EventChecker
}

// Graph is the ownership lineage of the objects events are about. It is
// safe for concurrent use.
type Graph struct {
	opts Options

	mu       sync.RWMutex
	objs     map[ID]*Object
	children map[ID]map[ID]struct{}
	byName   map[ident]map[ID]struct{}
	dirty    map[ID]bool // true: write the object; false: delete its record
	subs     map[int]func(ID)
	nextSub  int
	learning string // why ownership is not learned; "" while it is
	// gen counts the changes of objs (put and remove, under mu): what a
	// Family learned of the graph holds while it has not moved.
	gen atomic.Uint64
}

// New returns an empty graph. Load reads what its store kept.
func New(opts Options) *Graph {
	if opts.Space == "" {
		opts.Space = DefaultSpace
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.CollectInterval <= 0 {
		opts.CollectInterval = DefaultCollectInterval
	}
	if opts.CollectGrace <= 0 {
		opts.CollectGrace = DefaultCollectGrace
	}
	return &Graph{
		opts:     opts,
		objs:     map[ID]*Object{},
		children: map[ID]map[ID]struct{}{},
		byName:   map[ident]map[ID]struct{}{},
		dirty:    map[ID]bool{},
		subs:     map[int]func(ID){},
		learning: "no source cluster is followed",
	}
}

// Load reads the objects the store kept, replacing none that the graph
// learned since New.
func (g *Graph) Load(ctx context.Context) error {
	if g.opts.Store == nil {
		return nil
	}
	var objs []*Object
	err := g.opts.Store.Records(ctx, g.opts.Space, func(key string, value []byte) error {
		o, err := decodeObject(key, value)
		if err != nil {
			g.opts.Log.Error("skipping unreadable lineage record", "key", key, "err", err)
			return nil
		}
		objs = append(objs, o)
		return nil
	})
	if err != nil {
		return fmt.Errorf("lineage: loading: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, o := range objs {
		if _, ok := g.objs[o.ID]; !ok {
			g.put(o, false)
		}
	}
	return nil
}

// SetLearning records whether ownership is being learned: reason is ""
// while it is, and otherwise says why not (no source, no permission), for
// family queries to tell their users.
func (g *Graph) SetLearning(reason string) {
	g.mu.Lock()
	g.learning = reason
	g.mu.Unlock()
}

// Learning returns "" while ownership is learned, and otherwise why not.
func (g *Graph) Learning() string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.learning
}

// Len returns the number of objects the graph holds.
func (g *Graph) Len() int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return len(g.objs)
}

// Get returns the object id, if the graph holds it.
func (g *Graph) Get(id ID) (Object, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	o, ok := g.objs[id]
	if !ok {
		return Object{}, false
	}
	return clone(o), true
}

// Lookup returns every object the graph holds under kind (any case),
// namespace and name, deleted ones included, oldest first.
func (g *Graph) Lookup(kind, namespace, name string) []Object {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var out []Object
	for id := range g.byName[identOf(kind, namespace, name)] {
		out = append(out, clone(g.objs[id]))
	}
	slices.SortFunc(out, func(a, b Object) int { return a.FirstSeen.Compare(b.FirstSeen) })
	return out
}

// Children returns the IDs of the objects id owns directly.
func (g *Graph) Children(id ID) []ID {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return slices.Sorted(maps.Keys(g.children[id]))
}

// Subscribe calls fn with the ID of every object added or whose owners or
// node changed, after the change; fn must not block or call back into
// the graph's writers. The returned function ends the subscription.
func (g *Graph) Subscribe(fn func(ID)) (cancel func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.nextSub
	g.nextSub++
	g.subs[n] = fn
	return func() {
		g.mu.Lock()
		delete(g.subs, n)
		g.mu.Unlock()
	}
}

// Observe records o as seen existing now (from its metadata): it is added
// or updated (owners, names and node as given; FirstSeen kept if
// earlier), and an object known only by the same kind, namespace and name
// is merged into it.
func (g *Graph) Observe(o Object) {
	now := g.opts.Clock.Now()
	g.mu.Lock()
	changed := g.observe(o, now)
	subs := g.subscribers(changed)
	g.mu.Unlock()
	notify(subs, changed)
}

// observe is Observe under g.mu; it returns the IDs whose membership may
// have changed.
func (g *Graph) observe(o Object, now time.Time) []ID {
	if o.LastSeen.IsZero() || o.LastSeen.Before(now) {
		o.LastSeen = now
	}
	if o.FirstSeen.IsZero() || o.FirstSeen.After(o.LastSeen) {
		o.FirstSeen = o.LastSeen
	}
	changed := []ID{o.ID}
	if !o.ID.ByName() {
		// Absorb a name-only record of the same object (learned from a
		// controller's event before its metadata): its children follow.
		nid := NameID(o.Kind, o.Namespace, o.Name)
		if old, ok := g.objs[nid]; ok {
			if len(o.Owners) == 0 {
				o.Owners = old.Owners
			}
			for c := range g.children[nid] {
				if co := g.objs[c]; co != nil {
					nc := clone(co)
					for i, ow := range nc.Owners {
						if ow == nid {
							nc.Owners[i] = o.ID
						}
					}
					g.put(&nc, true)
					changed = append(changed, c)
				}
			}
			if old.FirstSeen.Before(o.FirstSeen) {
				o.FirstSeen = old.FirstSeen
			}
			g.remove(nid)
		}
	}
	if cur, ok := g.objs[o.ID]; ok {
		if cur.FirstSeen.Before(o.FirstSeen) {
			o.FirstSeen = cur.FirstSeen
		}
		if o.Node == "" {
			o.Node = cur.Node
		}
		if o.Owners == nil && cur.Owners != nil {
			o.Owners = cur.Owners
		}
		if o.APIVersion == "" {
			o.APIVersion = cur.APIVersion
		}
		if cur.Deleted && !o.Deleted && cur.LastSeen.After(o.LastSeen) {
			return nil // a late report of an object seen deleted since
		}
		if same(cur, &o) {
			// Only LastSeen moved: keep it in memory, written with the
			// next real change (a deleted object's LastSeen is always
			// written, by MarkDeleted).
			cur.LastSeen = o.LastSeen
			return nil
		}
	}
	g.put(&o, true)
	return changed
}

// same reports whether a and b differ at most in LastSeen.
func same(a, b *Object) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Namespace == b.Namespace && a.Name == b.Name &&
		slices.Equal(a.Owners, b.Owners) && a.Node == b.Node && a.FirstSeen.Equal(b.FirstSeen) && a.Deleted == b.Deleted
}

// MarkDeleted records that the object id was seen deleted at at (or now,
// when at is zero). An unknown id is ignored.
func (g *Graph) MarkDeleted(id ID, at time.Time) {
	if at.IsZero() {
		at = g.opts.Clock.Now()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.markDeleted(id, at)
}

func (g *Graph) markDeleted(id ID, at time.Time) {
	cur, ok := g.objs[id]
	if !ok || cur.Deleted {
		return
	}
	o := clone(cur)
	o.Deleted = true
	if at.After(o.LastSeen) {
		o.LastSeen = at
	}
	g.put(&o, true)
}

// Replace reconciles the objects of one kind (of apiVersion's group) with
// a complete list of them, as a relist reads them: each is observed, and
// every other such object the graph holds as existing is marked deleted
// now (it went while nothing watched it).
func (g *Graph) Replace(apiVersion, kind string, objs []Object) {
	now := g.opts.Clock.Now()
	group := groupOf(apiVersion)
	seen := make(map[ID]bool, len(objs))
	var changed []ID
	g.mu.Lock()
	for _, o := range objs {
		seen[o.ID] = true
		changed = append(changed, g.observe(o, now)...)
	}
	for id, o := range g.objs {
		if !seen[id] && !id.ByName() && !o.Deleted && o.Kind == kind && groupOf(o.APIVersion) == group {
			g.markDeleted(id, now)
		}
	}
	subs := g.subscribers(changed)
	g.mu.Unlock()
	notify(subs, changed)
}

// groupOf returns the group of an apiVersion ("" for core's "v1").
func groupOf(apiVersion string) string {
	for i := len(apiVersion) - 1; i >= 0; i-- {
		if apiVersion[i] == '/' {
			return apiVersion[:i]
		}
	}
	return ""
}

// put installs o under g.mu, indexing its owners and name; dirty marks it
// for the next flush.
func (g *Graph) put(o *Object, dirty bool) {
	if cur, ok := g.objs[o.ID]; ok {
		g.unindex(cur)
	}
	g.gen.Add(1)
	g.objs[o.ID] = o
	for _, ow := range o.Owners {
		set := g.children[ow]
		if set == nil {
			set = map[ID]struct{}{}
			g.children[ow] = set
		}
		set[o.ID] = struct{}{}
	}
	k := identOf(o.Kind, o.Namespace, o.Name)
	set := g.byName[k]
	if set == nil {
		set = map[ID]struct{}{}
		g.byName[k] = set
	}
	set[o.ID] = struct{}{}
	if dirty {
		g.dirty[o.ID] = true
	}
}

// unindex takes o out of the owner and name indexes.
func (g *Graph) unindex(o *Object) {
	for _, ow := range o.Owners {
		if set := g.children[ow]; set != nil {
			delete(set, o.ID)
			if len(set) == 0 {
				delete(g.children, ow)
			}
		}
	}
	k := identOf(o.Kind, o.Namespace, o.Name)
	if set := g.byName[k]; set != nil {
		delete(set, o.ID)
		if len(set) == 0 {
			delete(g.byName, k)
		}
	}
}

// remove drops the object id under g.mu.
func (g *Graph) remove(id ID) {
	if o, ok := g.objs[id]; ok {
		g.unindex(o)
		g.gen.Add(1)
		delete(g.objs, id)
		g.dirty[id] = false
	}
}

// subscribers returns the subscribers to call for changed, under g.mu.
func (g *Graph) subscribers(changed []ID) []func(ID) {
	if len(changed) == 0 || len(g.subs) == 0 {
		return nil
	}
	return slices.Collect(maps.Values(g.subs))
}

func notify(subs []func(ID), changed []ID) {
	for _, fn := range subs {
		for _, id := range changed {
			fn(id)
		}
	}
}

func clone(o *Object) Object {
	c := *o
	c.Owners = slices.Clone(o.Owners)
	return c
}

// Flush writes what changed since the last flush to the store.
func (g *Graph) Flush(ctx context.Context) error {
	if g.opts.Store == nil {
		return nil
	}
	g.mu.Lock()
	if len(g.dirty) == 0 {
		g.mu.Unlock()
		return nil
	}
	writes := make([]storage.RecordWrite, 0, len(g.dirty))
	for id, put := range g.dirty {
		w := storage.RecordWrite{Key: string(id)}
		if o, ok := g.objs[id]; put && ok {
			w.Value = o.encode()
		}
		writes = append(writes, w)
	}
	taken := g.dirty
	g.dirty = map[ID]bool{}
	g.mu.Unlock()
	slices.SortFunc(writes, func(a, b storage.RecordWrite) int { return strings.Compare(a.Key, b.Key) })
	for len(writes) > 0 {
		n := min(len(writes), flushChunk)
		if err := g.opts.Store.SaveRecords(ctx, g.opts.Space, writes[:n]); err != nil {
			// Put back what was not written, unless changed again since.
			g.mu.Lock()
			for _, w := range writes {
				if _, again := g.dirty[ID(w.Key)]; !again {
					g.dirty[ID(w.Key)] = taken[ID(w.Key)]
				}
			}
			g.mu.Unlock()
			return fmt.Errorf("lineage: saving %d records: %w", len(writes), err)
		}
		writes = writes[n:]
	}
	return nil
}

// Collect drops the deleted objects that no kept event needs: deleted for
// longer than the grace period, owning no object the graph still holds,
// and without an event the store keeps (Options.Events). It returns how
// many it dropped.
func (g *Graph) Collect(ctx context.Context) (int, error) {
	if g.opts.Events == nil {
		return 0, nil
	}
	cutoff := g.opts.Clock.Now().Add(-g.opts.CollectGrace)
	g.mu.RLock()
	var cands []Object
	for _, o := range g.objs {
		if o.Deleted && o.LastSeen.Before(cutoff) && len(g.children[o.ID]) == 0 {
			cands = append(cands, clone(o))
		}
	}
	g.mu.RUnlock()
	// Leaves first; their owners become leaves for the next pass.
	dropped := 0
	for _, o := range cands {
		has, err := g.opts.Events.HasEvents(ctx, &o)
		if err != nil {
			return dropped, fmt.Errorf("lineage: collecting: %w", err)
		}
		if has {
			continue
		}
		g.mu.Lock()
		if cur, ok := g.objs[o.ID]; ok && cur.Deleted && len(g.children[o.ID]) == 0 {
			g.remove(o.ID)
			dropped++
		}
		g.mu.Unlock()
	}
	return dropped, nil
}

// Run flushes the graph every FlushInterval and collects it every
// CollectInterval until ctx ends, then flushes once more.
func (g *Graph) Run(ctx context.Context) {
	flush := g.opts.Clock.NewTicker(g.opts.FlushInterval)
	defer flush.Stop()
	collect := g.opts.Clock.NewTicker(g.opts.CollectInterval)
	defer collect.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if err := g.Flush(fctx); err != nil {
				g.opts.Log.Error("lineage not saved at stop", "err", err)
			}
			cancel()
			return
		case <-flush.C():
			if err := g.Flush(ctx); err != nil && ctx.Err() == nil {
				g.opts.Log.Error("lineage not saved; retrying", "err", err)
			}
		case <-collect.C():
			if n, err := g.Collect(ctx); err != nil && ctx.Err() == nil {
				g.opts.Log.Error("lineage not collected", "err", err)
			} else if n > 0 {
				g.opts.Log.Info("lineage collected", "objects", n)
			}
		}
	}
}
