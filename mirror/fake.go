package mirror

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
)

// FakeSource is an in-memory Source for tests: a kube-apiserver's Events
// as a mirror sees them, with etcd-like resourceVersions, a history that
// Compact cuts (watches from before it get a 410 ERROR event, as from
// kube-apiserver), paginated lists at one resourceVersion, WatchList that
// can be turned off (then refused with 422), bookmarks on request, and
// failures injected with FailNext. The real thing is tested against in
// test/e2e.
type FakeSource struct {
	mu          sync.Mutex
	rev         int64
	objects     map[string]*corev1.Event
	history     []watch.Event // every change, in order
	compacted   int64         // watches must start at or after this revision
	noWatchList bool
	fail        []error
	watches     []*fakeWatch
	lists       map[string][]corev1.Event
	listSeq     int
	// Calls counts requests by kind: "list", "watch", "watchlist".
	calls map[string]int
	// watchRVs are the resourceVersions watches were asked to start from.
	watchRVs []string
}

var _ Source = (*FakeSource)(nil)

// NewFakeSource returns an empty source whose WatchList works.
func NewFakeSource() *FakeSource {
	return &FakeSource{objects: map[string]*corev1.Event{}, lists: map[string][]corev1.Event{}, calls: map[string]int{}}
}

func key(ns, name string) string { return ns + "/" + name }

// Create stores ev (a uid is made up if it has none) and returns the
// stored copy.
func (f *FakeSource) Create(ev *corev1.Event) *corev1.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev = ev.DeepCopy()
	if ev.UID == "" {
		ev.UID = types.UID(fmt.Sprintf("uid-%s-%d", ev.Name, f.rev+1))
	}
	return f.writeLocked(watch.Added, ev)
}

// Update replaces the stored event of ev's namespace and name.
func (f *FakeSource) Update(ev *corev1.Event) *corev1.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writeLocked(watch.Modified, ev.DeepCopy())
}

// Delete removes an event, as its TTL or a user would.
func (f *FakeSource) Delete(ns, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev, ok := f.objects[key(ns, name)]
	if !ok {
		return
	}
	delete(f.objects, key(ns, name))
	ev = ev.DeepCopy()
	f.rev++
	ev.ResourceVersion = strconv.FormatInt(f.rev, 10)
	f.recordLocked(watch.Event{Type: watch.Deleted, Object: ev})
}

// Get returns the stored event, or nil.
func (f *FakeSource) Get(ns, name string) *corev1.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ev, ok := f.objects[key(ns, name)]; ok {
		return ev.DeepCopy()
	}
	return nil
}

func (f *FakeSource) writeLocked(typ watch.EventType, ev *corev1.Event) *corev1.Event {
	f.rev++
	ev.ResourceVersion = strconv.FormatInt(f.rev, 10)
	f.objects[key(ev.Namespace, ev.Name)] = ev
	f.recordLocked(watch.Event{Type: typ, Object: ev.DeepCopy()})
	return ev.DeepCopy()
}

func (f *FakeSource) recordLocked(e watch.Event) {
	f.history = append(f.history, e)
	for _, w := range f.watches {
		w.send(e)
	}
}

// Revision is the source's current resourceVersion.
func (f *FakeSource) Revision() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev
}

// Compact drops the history up to the current revision: watches from an
// older resourceVersion, and continuations of lists served before, get
// 410.
func (f *FakeSource) Compact() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compacted = f.rev
	f.history = nil
	f.lists = map[string][]corev1.Event{}
}

// SetWatchList turns WatchList (sendInitialEvents) on or off.
func (f *FakeSource) SetWatchList(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noWatchList = !on
}

// FailNext makes the next requests (lists and watches) fail with errs, in
// order.
func (f *FakeSource) FailNext(errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = append(f.fail, errs...)
}

// Bookmark sends every watch that asked for bookmarks one at the current
// revision.
func (f *FakeSource) Bookmark() {
	f.mu.Lock()
	defer f.mu.Unlock()
	bm := &corev1.Event{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.FormatInt(f.rev, 10)}}
	for _, w := range f.watches {
		if w.bookmarks {
			w.send(watch.Event{Type: watch.Bookmark, Object: bm})
		}
	}
}

// CloseWatches ends every open watch, as kube-apiserver does at a watch's
// timeout or its own restart.
func (f *FakeSource) CloseWatches() {
	f.mu.Lock()
	ws := f.watches
	f.watches = nil
	f.mu.Unlock()
	for _, w := range ws {
		w.Stop()
	}
}

// Calls returns how many requests of a kind ("list", "watch",
// "watchlist") were made.
func (f *FakeSource) Calls(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[kind]
}

// WatchResourceVersions returns the resourceVersions the watches were
// asked to start from ("" for WatchList).
func (f *FakeSource) WatchResourceVersions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.watchRVs)
}

func (f *FakeSource) failure() error {
	if len(f.fail) == 0 {
		return nil
	}
	err := f.fail[0]
	f.fail = f.fail[1:]
	return err
}

func (f *FakeSource) sortedLocked() []corev1.Event {
	keys := make([]string, 0, len(f.objects))
	for k := range f.objects {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]corev1.Event, len(keys))
	for i, k := range keys {
		out[i] = *f.objects[k].DeepCopy()
	}
	return out
}

var eventsResource = schema.GroupResource{Resource: "events"}

// List implements Source: the current events, a page of opts.Limit at a
// time, every page at the first's resourceVersion.
func (f *FakeSource) List(_ context.Context, opts metav1.ListOptions) (*corev1.EventList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["list"]++
	if err := f.failure(); err != nil {
		return nil, err
	}
	var items []corev1.Event
	var rv string
	if opts.Continue != "" {
		rest, ok := f.lists[opts.Continue]
		if !ok {
			return nil, apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result.")
		}
		delete(f.lists, opts.Continue)
		rv, items = rest[0].ResourceVersion, rest[1:]
	} else {
		rv, items = strconv.FormatInt(f.rev, 10), f.sortedLocked()
	}
	l := &corev1.EventList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
	if opts.Limit > 0 && int64(len(items)) > opts.Limit {
		f.listSeq++
		tok := strconv.Itoa(f.listSeq)
		// The first element carries the list's resourceVersion.
		f.lists[tok] = append([]corev1.Event{{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}}, items[opts.Limit:]...)
		l.Continue, items = tok, items[:opts.Limit]
	}
	l.Items = items
	return l, nil
}

// Watch implements Source.
func (f *FakeSource) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	if initial {
		f.calls["watchlist"]++
	} else {
		f.calls["watch"]++
	}
	f.watchRVs = append(f.watchRVs, opts.ResourceVersion)
	if err := f.failure(); err != nil {
		return nil, err
	}
	if initial && f.noWatchList {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "",
			field.ErrorList{field.Forbidden(field.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled")})
	}
	w := &fakeWatch{ch: make(chan watch.Event, 100_000), bookmarks: opts.AllowWatchBookmarks, done: make(chan struct{})}
	switch {
	case initial:
		for _, ev := range f.sortedLocked() {
			w.send(watch.Event{Type: watch.Added, Object: &ev})
		}
		w.send(watch.Event{Type: watch.Bookmark, Object: &corev1.Event{ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: strconv.FormatInt(f.rev, 10), Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}})
	case opts.ResourceVersion != "" && opts.ResourceVersion != "0":
		from, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", opts.ResourceVersion))
		}
		if from < f.compacted {
			// kube-apiserver without a watch cache: the watch is
			// accepted and ends with an ERROR event.
			st := apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, f.compacted)).ErrStatus
			w.send(watch.Event{Type: watch.Error, Object: &st})
			w.Stop()
			return w, nil
		}
		for _, e := range f.history {
			if rv, _ := strconv.ParseInt(e.Object.(*corev1.Event).ResourceVersion, 10, 64); rv > from {
				w.send(e)
			}
		}
	}
	f.watches = append(f.watches, w)
	return w, nil
}

// fakeWatch is one watch of a FakeSource.
type fakeWatch struct {
	mu        sync.Mutex
	ch        chan watch.Event
	bookmarks bool
	done      chan struct{}
	stopped   bool
}

func (w *fakeWatch) send(e watch.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if o, ok := e.Object.(*corev1.Event); ok {
		e.Object = o.DeepCopy()
	}
	select {
	case w.ch <- e:
	default:
		panic("FakeSource: a watch fell 100,000 events behind")
	}
}

// ResultChan implements watch.Interface.
func (w *fakeWatch) ResultChan() <-chan watch.Event { return w.ch }

// Stop implements watch.Interface.
func (w *fakeWatch) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.stopped = true
		close(w.ch)
	}
}
