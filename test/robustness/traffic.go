package robustness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TrafficConfig configures a Traffic. Zero fields take their defaults.
type TrafficConfig struct {
	// Namespace all operations go to.
	Namespace string
	// Keys is how many event names the clients share (12): few enough
	// that writes race on them.
	Keys int
	// Pods and Reasons are how many values involvedObject.name and
	// reason take (3 each): the indexed field selectors select by them.
	Pods, Reasons int
	// Clients issue operations one after another (6), and Watchers watch
	// one watch after another (3).
	Clients, Watchers int
	// Seed makes each client's and watcher's choices reproducible.
	Seed uint64
	// RequestTimeout bounds each request (15 s: above eventsd's 10 s etcd
	// request timeout, so eventsd answers first).
	RequestTimeout time.Duration
	// MaxWatch bounds how long one watch runs before it is resumed
	// elsewhere (2 s).
	MaxWatch time.Duration
	// OpInterval, when > 0, is the pause each client takes between
	// operations (with -race and two cores, none is needed).
	OpInterval time.Duration
	// NoDeletes leaves deletes out, so that every deletion is an expiry.
	NoDeletes bool
}

func (c TrafficConfig) withDefaults() TrafficConfig {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Keys, 12)
	def(&c.Pods, 3)
	def(&c.Reasons, 3)
	def(&c.Clients, 6)
	def(&c.Watchers, 3)
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 15 * time.Second
	}
	if c.MaxWatch <= 0 {
		c.MaxWatch = 2 * time.Second
	}
	return c
}

// Traffic drives concurrent clients through the replicas' HTTP APIs with
// client-go and records what they do.
type Traffic struct {
	cfg     TrafficConfig
	rec     *Recorder
	clients []kubernetes.Interface
	known   *knowledge

	// Ops counts operations issued.
	ops atomic.Int64
}

// NewTraffic makes clients for the replicas at urls (their base URLs);
// each operation goes to one picked at random, each watch resumes on one
// picked at random.
func NewTraffic(cfg TrafficConfig, rec *Recorder, urls []string) (*Traffic, error) {
	cfg = cfg.withDefaults()
	t := &Traffic{cfg: cfg, rec: rec, known: newKnowledge(rec)}
	for _, u := range urls {
		// QPS -1: no client-side rate limit; Timeout bounds each request.
		cs, err := kubernetes.NewForConfig(&rest.Config{Host: u, QPS: -1, Timeout: cfg.RequestTimeout})
		if err != nil {
			return nil, fmt.Errorf("client for %s: %w", u, err)
		}
		t.clients = append(t.clients, cs)
	}
	return t, nil
}

// Ops is the number of operations issued so far.
func (t *Traffic) Ops() int64 { return t.ops.Load() }

// Run runs the clients and watchers until ctx ends, then waits for them.
func (t *Traffic) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range t.cfg.Clients {
		wg.Go(func() { t.client(ctx, i) })
	}
	for i := range t.cfg.Watchers {
		wg.Go(func() { t.watcher(ctx, t.cfg.Clients+i) })
	}
	wg.Wait()
}

func (t *Traffic) rng(id int) *rand.Rand {
	return rand.New(rand.NewPCG(t.cfg.Seed, uint64(id)))
}

func (t *Traffic) key(r *rand.Rand) string { return fmt.Sprintf("ev-%02d", r.IntN(t.cfg.Keys)) }

func (t *Traffic) selector(r *rand.Rand) string {
	switch r.IntN(4) {
	case 0:
		return fmt.Sprintf("reason=R%d", r.IntN(t.cfg.Reasons))
	case 1:
		return fmt.Sprintf("involvedObject.name=pod-%d", r.IntN(t.cfg.Pods))
	}
	return ""
}

// client issues random operations until ctx ends.
func (t *Traffic) client(ctx context.Context, id int) {
	r := t.rng(id)
	for seq := 0; ctx.Err() == nil; seq++ {
		o := &Op{Client: id, Namespace: t.cfg.Namespace, Name: t.key(r), Replica: r.IntN(len(t.clients))}
		pre := t.known.keyRev(o.Name)
		switch n := r.IntN(100); {
		case n < 15 || (n < 55 && pre == 0):
			o.Kind = Create
		case n < 30:
			o.Kind = Update
		case n < 45:
			o.Kind = Patch
		case n < 55 && t.cfg.NoDeletes:
			o.Kind = Get
		case n < 55:
			o.Kind = Delete
		case n < 75:
			o.Kind = Get
		default:
			o.Kind = List
		}
		switch o.Kind {
		case Create, Update, Patch:
			o.Msg = fmt.Sprintf("%s-c%d-%d", t.cfg.Namespace, id, seq)
			o.Reason = fmt.Sprintf("R%d", r.IntN(t.cfg.Reasons))
			o.Pod = fmt.Sprintf("pod-%d", r.IntN(t.cfg.Pods))
		}
		switch o.Kind {
		case Update:
			o.PreRev = pre
		case Patch, Delete:
			if r.IntN(3) > 0 {
				o.PreRev = pre
			}
		case List:
			o.Name = ""
			o.List = &ListOp{Selector: t.selector(r)}
			switch n := r.IntN(20); {
			case n < 2:
				o.List.RV = "0"
			case n < 6:
				if rev, at, ok := t.known.recent(r); ok {
					o.List.RV, o.List.Match, o.List.RVSeen = strconv.FormatInt(rev, 10), "NotOlderThan", at
				}
			case n < 10:
				if rev, at, ok := t.known.recent(r); ok {
					o.List.RV, o.List.Match, o.List.RVSeen = strconv.FormatInt(rev, 10), "Exact", at
				}
			}
			if r.IntN(3) == 0 && o.List.RV != "0" {
				o.List.Limit = int64(1 + r.IntN(4))
			}
		}
		// An operation cut short by the end of the run is Unknown, and
		// resolved like any other.
		t.do(ctx, o)
		t.ops.Add(1)
		t.rec.AddOp(o)
		if o.Outcome == Unknown {
			// The replica may be down: do not spin on it.
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
		if t.cfg.OpInterval > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(t.cfg.OpInterval):
			}
		}
	}
}

// event is the Event a create, update or patch writes.
func (t *Traffic) event(o *Op) *corev1.Event {
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	return &corev1.Event{
		TypeMeta:   metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: o.Namespace, Name: o.Pod, APIVersion: "v1",
			UID: types.UID("uid-" + o.Pod)},
		Reason:         o.Reason,
		Message:        o.Msg,
		Source:         corev1.EventSource{Component: "robustness", Host: "node1"},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
		Type:           corev1.EventTypeNormal,
	}
}

// do runs o on its replica and records its outcome.
func (t *Traffic) do(ctx context.Context, o *Op) {
	cs := t.clients[o.Replica]
	rc := cs.CoreV1().RESTClient()
	o.Call = t.rec.Now()
	var (
		code int
		raw  []byte
		err  error
	)
	// Writes are never retried by client-go (MaxRetries(0)): a retried
	// create that was applied the first time would get AlreadyExists for
	// its own write.
	exec := func(req *rest.Request) {
		res := req.MaxRetries(0).SetHeader("Content-Type", "application/json").Do(ctx).StatusCode(&code)
		raw, _ = res.Raw()
		err = res.Error()
	}
	switch o.Kind {
	case Create:
		body, _ := json.Marshal(t.event(o))
		exec(rc.Post().Namespace(o.Namespace).Resource("events").Body(body))
	case Update:
		ev := t.event(o)
		ev.ResourceVersion = strconv.FormatInt(o.PreRev, 10)
		body, _ := json.Marshal(ev)
		exec(rc.Put().Namespace(o.Namespace).Resource("events").Name(o.Name).Body(body))
	case Patch:
		p := map[string]any{
			"message": o.Msg, "reason": o.Reason,
			"involvedObject": map[string]any{"name": o.Pod, "uid": "uid-" + o.Pod},
		}
		if o.PreRev != 0 {
			p["metadata"] = map[string]any{"resourceVersion": strconv.FormatInt(o.PreRev, 10)}
		}
		body, _ := json.Marshal(p)
		res := rc.Patch(types.MergePatchType).Namespace(o.Namespace).Resource("events").Name(o.Name).Body(body).
			MaxRetries(0).Do(ctx).StatusCode(&code)
		raw, _ = res.Raw()
		err = res.Error()
	case Delete:
		opts := metav1.DeleteOptions{}
		if o.PreRev != 0 {
			rv := strconv.FormatInt(o.PreRev, 10)
			opts.Preconditions = &metav1.Preconditions{ResourceVersion: &rv}
		}
		body, _ := json.Marshal(opts)
		exec(rc.Delete().Namespace(o.Namespace).Resource("events").Name(o.Name).Body(body))
	case Get:
		var ev *corev1.Event
		ev, err = cs.CoreV1().Events(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if err == nil {
			o.Got = objectOf(ev)
			o.Rev = o.Got.Rev
			t.known.saw(o.Name, o.Rev)
		}
	case List:
		if o.List.Match == "" {
			o.List.RVSeen = o.Call
		}
		err = t.list(ctx, cs, o)
		o.List.Gone = apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
	}
	o.Return = t.rec.Now()
	o.Outcome = classify(code, err)
	if err != nil {
		o.Err = err.Error()
	}
	if o.Outcome == Unknown {
		o.Return = Never
	}
	switch o.Kind {
	case Create, Update, Patch:
		if o.Outcome == OK {
			var ev corev1.Event
			if jerr := json.Unmarshal(raw, &ev); jerr != nil {
				o.Outcome, o.Err, o.Return = Unknown, "decoding the answer: "+jerr.Error(), Never
				return
			}
			got := objectOf(&ev)
			o.Rev = got.Rev
			if got.Msg != o.Msg || got.Name != o.Name {
				o.Err = fmt.Sprintf("answered with %+v", got)
			}
			t.known.saw(o.Name, o.Rev)
		}
	case Delete:
		if o.Outcome == OK {
			t.known.saw(o.Name, 0)
		}
	}
}

// list reads every page of o's list.
func (t *Traffic) list(ctx context.Context, cs kubernetes.Interface, o *Op) error {
	opts := metav1.ListOptions{FieldSelector: o.List.Selector, ResourceVersion: o.List.RV,
		ResourceVersionMatch: metav1.ResourceVersionMatch(o.List.Match), Limit: o.List.Limit}
	for {
		l, err := cs.CoreV1().Events(o.Namespace).List(ctx, opts)
		if err != nil {
			return err
		}
		rev, err := strconv.ParseInt(l.ResourceVersion, 10, 64)
		if err != nil {
			return fmt.Errorf("list resourceVersion %q: %w", l.ResourceVersion, err)
		}
		if o.List.Pages == 0 {
			o.Rev = rev
			t.known.sawRev(rev)
		} else if rev != o.Rev {
			err := &pageRevisionError{first: o.Rev, page: o.List.Pages, rev: rev}
			o.List.Mismatch = err.Error() // a violation CheckLists reports
			return err
		}
		o.List.Pages++
		for i := range l.Items {
			o.List.Items = append(o.List.Items, objectOf(&l.Items[i]))
		}
		if l.Continue == "" {
			return nil
		}
		opts = metav1.ListOptions{FieldSelector: o.List.Selector, Limit: o.List.Limit, Continue: l.Continue}
	}
}

// pageRevisionError is a later page of a list served at another revision
// than the first: a violation, reported as an op that failed with it.
type pageRevisionError struct {
	first int64
	page  int
	rev   int64
}

func (e *pageRevisionError) Error() string {
	return fmt.Sprintf("page %d served at revision %d, the first at %d", e.page, e.rev, e.first)
}

// classify turns an answer into an outcome.
func classify(code int, err error) Outcome {
	if err == nil {
		return OK
	}
	var pe *pageRevisionError
	if errors.As(err, &pe) {
		return Failed
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		code = int(se.Status().Code)
	}
	switch {
	case apierrors.IsAlreadyExists(err):
		return Exists
	case apierrors.IsConflict(err):
		return Conflict
	case apierrors.IsNotFound(err):
		return NotFound
	}
	switch code {
	case http.StatusInsufficientStorage, http.StatusUnprocessableEntity, http.StatusBadRequest,
		http.StatusTooManyRequests, http.StatusRequestEntityTooLarge, http.StatusGone:
		return Failed
	}
	return Unknown
}

func objectOf(ev *corev1.Event) Object {
	rev, _ := strconv.ParseInt(ev.ResourceVersion, 10, 64)
	return Object{Name: ev.Name, Rev: rev, Msg: ev.Message, Reason: ev.Reason, Pod: ev.InvolvedObject.Name}
}

// watcher runs watches one after another until ctx ends: resuming its
// last watch on a random replica, starting from a revision some client
// saw, or a watch-list of the current state; with a random selector.
func (t *Traffic) watcher(ctx context.Context, id int) {
	r := t.rng(id)
	var (
		from, seen int64
		sel        string
	)
	for ctx.Err() == nil {
		w := &Watch{Client: id, Namespace: t.cfg.Namespace, Replica: r.IntN(len(t.clients))}
		switch n := r.IntN(10); {
		case n < 6 && from > 0:
			w.StartRev, w.StartRevSeen, w.Selector = from, seen, sel
		case n < 8:
			rev, at, ok := t.known.recent(r)
			if !ok {
				w.SendInitialEvents = true
			}
			w.StartRev, w.StartRevSeen, w.Selector = rev, at, t.selector(r)
		default:
			w.SendInitialEvents, w.Selector = true, t.selector(r)
		}
		if w.SendInitialEvents {
			w.StartRev = 0
		}
		d := time.Duration(1+r.Int64N(int64(t.cfg.MaxWatch))) + t.cfg.MaxWatch/10
		wctx, cancel := context.WithTimeout(ctx, d)
		t.watch(wctx, w)
		cancel()
		t.rec.AddWatch(w)
		if w.Gone || w.Err != "" && len(w.Events) == 0 {
			from = 0
			select { // the replica may be down: do not spin on it
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		from, seen, sel = reachedOf(w), w.End, w.Selector
	}
}

// reachedOf is the revision w reached: its last event or bookmark.
func reachedOf(w *Watch) int64 {
	rev := w.StartRev
	for _, e := range w.Events {
		rev = max(rev, e.Rev)
	}
	return rev
}

// watch runs w until ctx ends or the watch does, recording its events.
func (t *Traffic) watch(ctx context.Context, w *Watch) {
	opts := metav1.ListOptions{FieldSelector: w.Selector, AllowWatchBookmarks: true}
	if w.SendInitialEvents {
		yes := true
		opts.SendInitialEvents = &yes
		opts.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	} else {
		opts.ResourceVersion = strconv.FormatInt(w.StartRev, 10)
	}
	w.Start = t.rec.Now()
	defer func() { w.End = t.rec.Now() }()
	wi, err := t.clients[w.Replica].CoreV1().Events(w.Namespace).Watch(ctx, opts)
	if err != nil {
		w.Err = err.Error()
		w.Gone = apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
		return
	}
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-wi.ResultChan():
			if !ok {
				return
			}
			if e.Type == watch.Error {
				err := apierrors.FromObject(e.Object)
				w.Err = err.Error()
				w.Gone = apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
				return
			}
			ev, ok := e.Object.(*corev1.Event)
			if !ok {
				w.Err = fmt.Sprintf("watch delivered a %T", e.Object)
				return
			}
			we := WatchEvent{Type: string(e.Type), Object: objectOf(ev), At: t.rec.Now()}
			if e.Type == watch.Bookmark {
				we.Object = Object{Rev: we.Rev}
				we.InitialEventsEnd = ev.Annotations[metav1.InitialEventsAnnotationKey] == "true"
			} else {
				t.known.saw(ev.Name, we.Rev)
			}
			t.known.sawRev(we.Rev)
			w.Events = append(w.Events, we)
		}
	}
}

// Observer is a watch without selector of the traffic's namespace that
// resumes, on a random replica, whenever it ends, so that the change log
// has every change of the namespace from where it started.
type Observer struct {
	t       *Traffic
	reached atomic.Int64
	cancel  context.CancelFunc
	done    chan struct{}
}

// Observe starts an observer from revision from (before the traffic's
// first write).
func (t *Traffic) Observe(from int64) *Observer {
	ctx, cancel := context.WithCancel(context.Background())
	ob := &Observer{t: t, cancel: cancel, done: make(chan struct{})}
	ob.reached.Store(from)
	go func() {
		defer close(ob.done)
		r := t.rng(-1)
		seen := t.rec.Now()
		for ctx.Err() == nil {
			w := &Watch{Client: -1, Namespace: t.cfg.Namespace, Replica: r.IntN(len(t.clients)),
				StartRev: ob.reached.Load(), StartRevSeen: seen}
			wctx, wcancel := context.WithTimeout(ctx, 3*t.cfg.MaxWatch)
			t.watch(wctx, w)
			wcancel()
			t.rec.AddWatch(w)
			if rev := reachedOf(w); rev > ob.reached.Load() {
				ob.reached.Store(rev)
				seen = w.End
			}
			if w.Err != "" && ctx.Err() == nil {
				select { // the replica may be down: try again shortly
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
	}()
	return ob
}

// Reached is the revision the observer has reached.
func (ob *Observer) Reached() int64 { return ob.reached.Load() }

// Stop ends the observer and waits for it.
func (ob *Observer) Stop() {
	ob.cancel()
	<-ob.done
}

// Sentinel creates an event on some replica, retrying until one answers
// (within timeout), and returns its revision: every change of the run is
// at or below it.
func (t *Traffic) Sentinel(ctx context.Context, name string, timeout time.Duration) (int64, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for i := 0; time.Now().Before(deadline); i++ {
		o := &Op{Client: -1, Kind: Create, Namespace: t.cfg.Namespace, Name: fmt.Sprintf("%s-%d", name, i),
			Replica: i % len(t.clients), Msg: fmt.Sprintf("%s-sentinel-%s-%d", t.cfg.Namespace, name, i), Reason: "R0", Pod: "pod-0"}
		t.do(ctx, o)
		t.rec.AddOp(o)
		if o.Outcome == OK {
			return o.Rev, nil
		}
		last = errors.New(o.Err)
		time.Sleep(100 * time.Millisecond)
	}
	return 0, fmt.Errorf("no replica acknowledged a create within %v: %w", timeout, last)
}

// knowledge is what the clients have seen lately: each key's last
// revision, and recent revisions with when a revision at least as high
// was first seen (from then on, the store had it), for preconditions and
// for watches and lists to start from.
type knowledge struct {
	rec  *Recorder
	mu   sync.Mutex
	keys map[string]int64
	revs []int64 // ring of the last 256 seen
	next int
	// maxima are the successive highest revisions seen, with when.
	maxima []seenRev
}

type seenRev struct{ rev, at int64 }

func newKnowledge(rec *Recorder) *knowledge {
	return &knowledge{rec: rec, keys: map[string]int64{}}
}

func (k *knowledge) keyRev(name string) int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys[name]
}

func (k *knowledge) saw(name string, rev int64) {
	k.mu.Lock()
	if rev == 0 || rev > k.keys[name] {
		k.keys[name] = rev
	}
	k.mu.Unlock()
	if rev != 0 {
		k.sawRev(rev)
	}
}

func (k *knowledge) sawRev(rev int64) {
	at := k.rec.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if n := len(k.maxima); n == 0 || rev > k.maxima[n-1].rev {
		k.maxima = append(k.maxima, seenRev{rev, at})
	}
	if len(k.revs) < 256 {
		k.revs = append(k.revs, rev)
		return
	}
	k.revs[k.next] = rev
	k.next = (k.next + 1) % len(k.revs)
}

// recent is a revision seen lately, and when the store was first seen to
// have reached it.
func (k *knowledge) recent(r *rand.Rand) (rev, at int64, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.revs) == 0 {
		return 0, 0, false
	}
	rev = k.revs[r.IntN(len(k.revs))]
	i := sort.Search(len(k.maxima), func(i int) bool { return k.maxima[i].rev >= rev })
	return rev, k.maxima[i].at, true
}
