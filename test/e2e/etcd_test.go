package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
)

// etcdReplicas is an etcd running in the test process and eventsd
// replicas over it.
type etcdReplicas struct {
	endpoint string
	cli      *clientv3.Client
	procs    []*eventsdtest.Process
}

// etcdStartReplicas starts an etcd in the test process (the test fails,
// not skips, if it cannot) and n eventsd processes over it with
// --storage-backend=etcd and args, each with a data directory of its own.
func etcdStartReplicas(t *testing.T, n int, args ...string) *etcdReplicas {
	t.Helper()
	e, endpoint := etcdtest.Start(t, t.TempDir())
	t.Cleanup(e.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: etcdtest.StartTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	r := &etcdReplicas{endpoint: endpoint, cli: cli}
	for range n {
		r.procs = append(r.procs, eventsdtest.Start(t, eventsdtest.Options{
			Args: append([]string{"--storage-backend=etcd", "--etcd-servers=" + endpoint, "--etcd-prefix=/registry"}, args...),
		}))
	}
	return r
}

// etcdPod is a pod reference with a uid derived from its name.
func etcdPod(ns, name string) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name, APIVersion: "v1", UID: types.UID("uid-" + name)}
}

// TestEtcdReplicasReadEachOthersWrites: events written through replica A
// (core/v1 and events.k8s.io/v1) read back through replica B: get, list,
// every indexed field selector, involves.*, label selectors and
// pagination with B's continue tokens; and a list on B right after a
// create acknowledged by A always has it (200 rounds, indexed and range
// lists, no resourceVersion).
func TestEtcdReplicasReadEachOthersWrites(t *testing.T) {
	t.Parallel()
	r := etcdStartReplicas(t, 2)
	a, b := r.procs[0].Clientset(), r.procs[1].Clientset()
	ctx := cgCtx(t)
	const ns = "shared"

	// Through A: core events of two pods, with labels, a related node.
	var want []string
	for i := range 6 {
		ev := cgCoreEvent(ns, fmt.Sprintf("core-%d", i), fmt.Sprintf("pod-%d", i%2))
		ev.Labels = map[string]string{"app": fmt.Sprintf("app-%d", i%3)}
		if i == 5 {
			ev.Type, ev.Reason = corev1.EventTypeWarning, "BackOff"
			ev.Related = &corev1.ObjectReference{Kind: "Node", Name: "node-1", UID: "uid-node-1"}
		}
		cgCreateCore(t, a, ev)
		want = append(want, ns+"/"+ev.Name)
	}
	// Through A's events.k8s.io/v1: events of another pod and controller.
	for i := range 3 {
		ev := cgNewEvent(ns, fmt.Sprintf("new-%d", i), "pod-new")
		ev.ReportingController = "other-ctrl"
		cgCreateNew(t, a, ev)
		want = append(want, ns+"/"+ev.Name)
	}
	slices.Sort(want)

	got, err := b.CoreV1().Events(ns).Get(ctx, "core-3", metav1.GetOptions{})
	if err != nil || got.Message != "message of core-3" || got.InvolvedObject.Name != "pod-1" {
		t.Fatalf("get core-3 on B: %+v %v", got, err)
	}
	gotNew, err := b.EventsV1().Events(ns).Get(ctx, "new-1", metav1.GetOptions{})
	if err != nil || gotNew.Note != "note of new-1" || gotNew.ReportingController != "other-ctrl" || gotNew.Regarding.Name != "pod-new" {
		t.Fatalf("get new-1 on B through events.k8s.io/v1: %+v %v", gotNew, err)
	}
	l, err := b.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cgEqualNames(t, "list on B", cgCoreNames(l.Items), want)

	coreSel := func(sel string) []string {
		t.Helper()
		l, err := b.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Fatalf("core list on B with %s: %v", sel, err)
		}
		return cgCoreNames(l.Items)
	}
	newSel := func(sel string) []string {
		t.Helper()
		l, err := b.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Fatalf("events.k8s.io list on B with %s: %v", sel, err)
		}
		return cgNewNames(l.Items)
	}
	p := func(names ...string) []string {
		for i, n := range names {
			names[i] = ns + "/" + n
		}
		return names
	}
	cgEqualNames(t, "involvedObject.uid", coreSel("involvedObject.uid=uid-pod-1"), p("core-1", "core-3", "core-5"))
	cgEqualNames(t, "involvedObject.name", coreSel("involvedObject.name=pod-0"), p("core-0", "core-2", "core-4"))
	cgEqualNames(t, "reason", coreSel("reason=BackOff"), p("core-5"))
	cgEqualNames(t, "type", coreSel("type=Warning"), p("core-5"))
	cgEqualNames(t, "source", coreSel("source=kubelet"), p("core-0", "core-1", "core-2", "core-3", "core-4", "core-5"))
	cgEqualNames(t, "two terms", coreSel("involvedObject.name=pod-1,type=Normal"), p("core-1", "core-3"))
	cgEqualNames(t, "involves.uid", coreSel("involves.uid=uid-node-1"), p("core-5"))
	cgEqualNames(t, "regarding.name", newSel("regarding.name=pod-new"), p("new-0", "new-1", "new-2"))
	cgEqualNames(t, "regarding.uid", newSel("regarding.uid=uid-pod-0"), p("core-0", "core-2", "core-4"))
	cgEqualNames(t, "reportingController", newSel("reportingController=other-ctrl"), p("new-0", "new-1", "new-2"))
	cgEqualNames(t, "events.k8s.io reason and type", newSel("reason=BackOff,type=Warning"), p("core-5"))
	ll, err := b.CoreV1().Events(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=app-1"})
	if err != nil {
		t.Fatal(err)
	}
	cgEqualNames(t, "label selector", cgCoreNames(ll.Items), p("core-1", "core-4"))

	// Pages on B with B's tokens, the indexed path and the range path;
	// a token B gave continues on A too (kube-apiserver's tokens).
	for _, sel := range []string{"", "source=kubelet"} {
		pages := cgAllPages(t, 20, metav1.ListOptions{Limit: 2, FieldSelector: sel}, func(o metav1.ListOptions) ([]string, string, error) {
			l, err := b.CoreV1().Events(ns).List(ctx, o)
			if err != nil {
				return nil, "", err
			}
			return cgCoreNames(l.Items), l.Continue, nil
		})
		full := coreSel(sel)
		cgEqualNames(t, "pages on B with "+sel, pages, full)
		first, err := b.CoreV1().Events(ns).List(ctx, metav1.ListOptions{Limit: 2, FieldSelector: sel})
		if err != nil || first.Continue == "" {
			t.Fatalf("first page on B: %v", err)
		}
		rest, err := a.CoreV1().Events(ns).List(ctx, metav1.ListOptions{Limit: 100, FieldSelector: sel, Continue: first.Continue})
		if err != nil {
			t.Fatalf("B's continue token on A: %v", err)
		}
		cgEqualNames(t, "B's first page and A's continuation with "+sel, append(cgCoreNames(first.Items), cgCoreNames(rest.Items)...), full)
	}

	// Read your writes across replicas: no resourceVersion, no retry.
	const rounds = 200
	const cns = "consistency"
	for i := range rounds {
		ev := cgCoreEvent(cns, fmt.Sprintf("ev-%03d", i), fmt.Sprintf("pod-%03d", i))
		ev.Labels = map[string]string{"round": "yes"}
		created := cgCreateCore(t, a, ev)
		if i%20 == 0 {
			// etcd's revision also moves with writes outside the events
			// prefix (another resource, compact_rev_key): lists still
			// answer at once.
			if _, err := r.cli.Put(ctx, "/registry/pods/"+cns+"/p", fmt.Sprint(i)); err != nil {
				t.Fatal(err)
			}
		}
		il, err := b.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=uid-pod-" + fmt.Sprintf("%03d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if len(il.Items) != 1 || il.Items[0].ResourceVersion != created.ResourceVersion {
			t.Fatalf("round %d: indexed list on B after A acknowledged %s at %s: %v", i, ev.Name, created.ResourceVersion, cgCoreNames(il.Items))
		}
		rl, err := b.CoreV1().Events(cns).List(ctx, metav1.ListOptions{LabelSelector: "round=yes"})
		if err != nil {
			t.Fatal(err)
		}
		if len(rl.Items) != i+1 || rl.Items[i].Name != ev.Name {
			t.Fatalf("round %d: range list on B after A acknowledged %s: %d items, want %d", i, ev.Name, len(rl.Items), i+1)
		}
		if cgRV(t, rl.ResourceVersion) < cgRV(t, created.ResourceVersion) {
			t.Fatalf("round %d: list on B at %s, before A's write at %s", i, rl.ResourceVersion, created.ResourceVersion)
		}
	}
}

// etcdLog records what an informer's handlers see, in order.
type etcdLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *etcdLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, s)
}

func (l *etcdLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// TestEtcdReplicasWatch: watches on replica B follow writes made through
// replica A: a client-go informer sees creates, updates and deletes in
// order; a watch from a resourceVersion A just returned gets exactly the
// later changes; bookmarks carry revisions; and a resourceVersion etcd has
// compacted gets 410 Expired on both replicas.
func TestEtcdReplicasWatch(t *testing.T) {
	t.Parallel()
	r := etcdStartReplicas(t, 2, "--watch-bookmark-interval=1s", "--etcd-compaction-interval=0")
	a, b := r.procs[0].Clientset(), r.procs[1].Clientset()
	ctx := cgCtx(t)

	// An informer on B.
	const ns = "informed"
	factory := informers.NewSharedInformerFactoryWithOptions(b, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Events().Informer()
	log := &etcdLog{}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { ev := obj.(*corev1.Event); log.add(fmt.Sprintf("add %s %d", ev.Name, ev.Count)) },
		UpdateFunc: func(_, obj any) {
			ev := obj.(*corev1.Event)
			log.add(fmt.Sprintf("update %s %d", ev.Name, ev.Count))
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			log.add("delete " + obj.(*corev1.Event).Name)
		},
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	defer factory.Shutdown()
	defer close(stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer on B did not sync")
	}
	x := cgCreateCore(t, a, cgCoreEvent(ns, "x", "pod"))
	x.Count = 2
	if _, err := a.CoreV1().Events(ns).Update(ctx, x, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.CoreV1().Events(ns).Delete(ctx, "x", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cgCreateNew(t, a, cgNewEvent(ns, "y", "pod"))
	wantSeen := []string{"add x 1", "update x 2", "delete x", "add y 0"}
	cgPoll(t, cgTimeout, "the informer on B to see A's writes", func() (bool, string) {
		return len(log.get()) >= len(wantSeen), fmt.Sprint(log.get())
	})
	cgEqualNames(t, "informer on B", log.get(), wantSeen)

	// A watch on B from the revision A returned: the next change only,
	// however far B's own watch of etcd has got.
	const wns = "resumed"
	var revs []string
	for i := range 20 {
		first := cgCreateCore(t, a, cgCoreEvent(wns, fmt.Sprintf("first-%02d", i), "pod"))
		revs = append(revs, first.ResourceVersion)
		w := cgWatch(t)(b.CoreV1().Events(wns).Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion}))
		second := cgCreateCore(t, a, cgCoreEvent(wns, fmt.Sprintf("second-%02d", i), "pod"))
		if got := cgNextCore(t, w, watch.Added, second.Name); got.ResourceVersion != second.ResourceVersion {
			t.Fatalf("watch on B from A's %s: %s at %s, want %s", first.ResourceVersion, got.Name, got.ResourceVersion, second.ResourceVersion)
		}
		w.Stop()
	}

	// A watch-list on B (as an informer's relist) not older than the
	// resourceVersion A just returned: the initial events have A's write,
	// never "too large resource version".
	for i := range 30 {
		c := cgCreateCore(t, a, cgCoreEvent(wns, fmt.Sprintf("listed-%02d", i), "pod"))
		w := cgWatch(t)(b.CoreV1().Events(wns).Watch(ctx, metav1.ListOptions{ResourceVersion: c.ResourceVersion,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true}))
		found := false
		for {
			e := cgNext(t, w)
			if e.Type == watch.Error {
				t.Fatalf("round %d: watch-list on B from A's %s: %v", i, c.ResourceVersion, e.Object)
			}
			ev := e.Object.(*corev1.Event)
			if e.Type == watch.Bookmark {
				if ev.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
					continue
				}
				if cgRV(t, ev.ResourceVersion) < cgRV(t, c.ResourceVersion) {
					t.Fatalf("round %d: initial events on B at %s, before A's write at %s", i, ev.ResourceVersion, c.ResourceVersion)
				}
				break
			}
			found = found || ev.Name == c.Name
		}
		if !found {
			t.Fatalf("round %d: the initial events on B lack %s, acknowledged by A at %s", i, c.Name, c.ResourceVersion)
		}
		w.Stop()
	}

	// Bookmarks on B carry revisions at least that of A's last write.
	last := cgCreateCore(t, a, cgCoreEvent(wns, "last", "pod"))
	bw := cgWatch(t)(b.CoreV1().Events(wns).Watch(ctx, metav1.ListOptions{ResourceVersion: last.ResourceVersion, AllowWatchBookmarks: true}))
	e := cgNext(t, bw)
	bm, ok := e.Object.(*corev1.Event)
	if e.Type != watch.Bookmark || !ok {
		t.Fatalf("watch on B with bookmarks: got %s %T, want BOOKMARK", e.Type, e.Object)
	}
	if cgRV(t, bm.ResourceVersion) < cgRV(t, last.ResourceVersion) {
		t.Fatalf("bookmark on B at %s, before A's write at %s", bm.ResourceVersion, last.ResourceVersion)
	}
	bw.Stop()

	// etcd compacts (as a kube-apiserver or another replica would): a
	// watch from before it gets 410 Expired on both replicas, although
	// B's shared watch still holds those changes.
	if _, err := r.cli.Compact(ctx, cgRV(t, last.ResourceVersion)); err != nil {
		t.Fatal(err)
	}
	for name, cs := range map[string]kubernetes.Interface{"A": a, "B": b} {
		w := cgWatch(t)(cs.CoreV1().Events(wns).Watch(ctx, metav1.ListOptions{ResourceVersion: revs[0]}))
		e := cgNext(t, w)
		if err := apierrors.FromObject(e.Object); e.Type != watch.Error || !apierrors.IsResourceExpired(err) {
			t.Fatalf("watch on %s from %s after etcd compacted at %s: got %s %v, want ERROR 410 Expired", name, revs[0], last.ResourceVersion, e.Type, e.Object)
		}
	}
}

// TestEtcdReplicasKubectl: kubectl against replica B lists and watches
// the events written through replica A.
func TestEtcdReplicasKubectl(t *testing.T) {
	t.Parallel()
	r := etcdStartReplicas(t, 2)
	pa, pb := r.procs[0], r.procs[1]
	a := pa.Clientset()
	kc := pb.Kubeconfig()
	first := cgCoreEvent("default", "web.1", "web")
	first.Message = "written through A"
	cgCreateCore(t, a, first)
	other := cgCoreEvent("other", "db.1", "db")
	other.Message = "another namespace through A"
	cgCreateCore(t, a, other)

	out := kubectlOK(t, pb, kc, "get", "events", "-A").Stdout
	for _, s := range []string{"written through A", "another namespace through A"} {
		if !strings.Contains(out, s) {
			t.Errorf("kubectl get events -A on B lacks %q:\n%s", s, out)
		}
	}
	out = kubectlOK(t, pb, kc, "get", "events", "-A", "--field-selector", "involvedObject.name=db").Stdout
	if !strings.Contains(out, "another namespace through A") || strings.Contains(out, "written through A") {
		t.Errorf("kubectl get events -A --field-selector involvedObject.name=db on B:\n%s", out)
	}

	bg := kubectlStartBackground(t, kc, "get", "events", "-w")
	bg.waitFor(t, "the existing event", func(s string) bool { return strings.Contains(s, "written through A") })
	fresh := cgCoreEvent("default", "web.2", "web")
	fresh.Message = "watched on B"
	cgCreateCore(t, a, fresh)
	bg.waitFor(t, "the event created through A", func(s string) bool { return strings.Contains(s, "watched on B") })
}

// TestEtcdReplicasTTL: both replicas with --event-ttl=3s; an event
// created through A expires through its etcd lease, and watches on A and
// on B get DELETED with its last state.
func TestEtcdReplicasTTL(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	r := etcdStartReplicas(t, 2, "--event-ttl=3s", "--lease-reuse-duration-seconds=1")
	a, b := r.procs[0].Clientset(), r.procs[1].Clientset()
	ctx := cgCtx(t)
	const ns = "ttl"
	l, err := a.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seenA := cgCollect(t, cgWatch(t)(a.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})))
	seenB := cgCollect(t, cgWatch(t)(b.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})))
	begin := time.Now()
	created := cgCreateCore(t, a, cgCoreEvent(ns, "short", "pod"))
	for name, seen := range map[string]func() []cgSeen{"A": seenA, "B": seenB} {
		var gone cgSeen
		cgPoll(t, 15*time.Second, "DELETED short on "+name, func() (bool, string) {
			var ok bool
			gone, ok = cgFind(seen(), watch.Deleted, "short")
			return ok, fmt.Sprintf("%+v", seen())
		})
		if gone.uid != created.UID {
			t.Errorf("DELETED on %s carries uid %s, want %s", name, gone.uid, created.UID)
		}
		if d := gone.at.Sub(begin); d < ttl {
			t.Errorf("DELETED on %s %v after the create, before the TTL %v", name, d, ttl)
		}
	}
	if _, err := b.CoreV1().Events(ns).Get(ctx, "short", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get on B after expiry: %v, want 404", err)
	}
}

// TestEtcdReplicasKillUnderLoad: eight writers create through both
// replicas; A is killed (SIGKILL) in the middle. Writers on A fail from
// then on, writers on B go on, and every create either replica
// acknowledged is readable through B with its content.
func TestEtcdReplicasKillUnderLoad(t *testing.T) {
	t.Parallel()
	r := etcdStartReplicas(t, 2)
	pa := r.procs[0]
	a, b := pa.Clientset(), r.procs[1].Clientset()
	ctx := cgCtx(t)
	const (
		ns       = "load"
		writers  = 8
		maxTotal = 2000
		runFor   = 4 * time.Second
		killAt   = 1500 * time.Millisecond // or when half of maxTotal are sent
	)
	var (
		mu           sync.Mutex
		acked        = map[string]cgAck{}
		ackedBy      [2]int
		failedBefore [2]int // failures before the kill was done
		failedAfter  [2]int
		ackedAfter   int // acknowledgements by A of creates sent after the kill
		total        atomic.Int64
		killed       atomic.Bool
		wg           sync.WaitGroup
	)
	deadline := time.Now().Add(runFor)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, cs := w%2, a
			if rep == 1 {
				cs = b
			}
			failures := 0 // of creates through A sent after the kill
			// Writers on A go on after the kill until five creates
			// failed; the others stop at the deadline or maxTotal.
			more := func() bool {
				if rep == 0 && killed.Load() {
					return failures < 5
				}
				return time.Now().Before(deadline) && total.Add(1) <= maxTotal
			}
			for i := 0; more(); i++ {
				afterKill := killed.Load()
				ev := cgCoreEvent(ns, fmt.Sprintf("w%d-%05d", w, i), fmt.Sprintf("pod-%d", w))
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				code, ack, err := cgPost(rctx, cs, ev)
				cancel()
				mu.Lock()
				switch {
				case err == nil && code == 201:
					acked[ev.Name] = ack
					ackedBy[rep]++
					if rep == 0 && afterKill {
						ackedAfter++
					}
				case afterKill:
					failedAfter[rep]++
					if rep == 0 {
						failures++
					}
				default:
					failedBefore[rep]++
				}
				mu.Unlock()
			}
		}()
	}
	// Kill A at killAt, or earlier once half the creates are sent.
	for start := time.Now(); time.Since(start) < killAt && total.Load() < maxTotal/2; {
		time.Sleep(10 * time.Millisecond)
	}
	pa.Kill()
	killed.Store(true)
	wg.Wait()

	t.Logf("creates acknowledged: %d by A, %d by B; failed before the kill returned: A %d, B %d; after: A %d, B %d",
		ackedBy[0], ackedBy[1], failedBefore[0], failedBefore[1], failedAfter[0], failedAfter[1])
	if ackedBy[0] == 0 || ackedBy[1] == 0 {
		t.Fatalf("no load on one replica: %v acknowledged", ackedBy)
	}
	if ackedAfter != 0 {
		t.Errorf("A acknowledged %d creates sent after it was killed", ackedAfter)
	}
	if failedAfter[0] == 0 {
		t.Errorf("no create through A failed after the kill: the writers on A did not run on")
	}
	if failedBefore[1]+failedAfter[1] != 0 {
		t.Errorf("%d creates through B failed", failedBefore[1]+failedAfter[1])
	}
	cgCheckAcked(t, b, ns, acked, false)
	l, err := b.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Creates in flight when A died may be stored unacknowledged; at most
	// one per writer on A.
	if extra := len(l.Items) - len(acked); extra < 0 || extra > writers/2 {
		t.Errorf("%d events stored through B, %d acknowledged", len(l.Items), len(acked))
	}
	t.Logf("%d acknowledged, %d stored", len(acked), len(l.Items))
	for _, ev := range l.Items {
		if want := "message of " + ev.Name; ev.Message != want {
			t.Errorf("%s: message %q, want %q", ev.Name, ev.Message, want)
		}
	}
}

// TestEtcdReplicasOneEtcdWatchEach: each replica has one etcd watch, by
// etcd's own count, however many clients watch through it: watches from
// now on, from a resourceVersion, with bookmarks, and informers. Not
// parallel: etcd's gauge counts the watchers of every etcd in the process.
func TestEtcdReplicasOneEtcdWatchEach(t *testing.T) {
	before := etcdtest.Watchers(t)
	r := etcdStartReplicas(t, 2)
	a, b := r.procs[0].Clientset(), r.procs[1].Clientset()
	ctx := cgCtx(t)
	if n := etcdtest.Watchers(t) - before; n != 2 {
		t.Fatalf("etcd has %v watchers with two idle replicas, want 2", n)
	}
	const ns = "fanout"
	start := cgCreateCore(t, a, cgCoreEvent(ns, "start", "pod"))
	var ws []watch.Interface
	for i := range 30 {
		cs := b
		if i%3 == 0 {
			cs = a
		}
		opts := metav1.ListOptions{AllowWatchBookmarks: i%2 == 0}
		if i%2 == 1 {
			opts.ResourceVersion = start.ResourceVersion
		}
		ws = append(ws, cgWatch(t)(cs.CoreV1().Events(ns).Watch(ctx, opts)))
	}
	factory := informers.NewSharedInformerFactory(b, 0)
	inf := factory.Events().V1().Events().Informer()
	stop := make(chan struct{})
	factory.Start(stop)
	defer factory.Shutdown()
	defer close(stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	done := cgCreateNew(t, a, cgNewEvent(ns, "done", "pod"))
	for i, w := range ws {
		for {
			e := cgNext(t, w)
			if ev, ok := e.Object.(*corev1.Event); ok && e.Type == watch.Added && ev.Name == "done" {
				break
			}
			if e.Type == watch.Error {
				t.Fatalf("watch %d: %v", i, e.Object)
			}
		}
	}
	cgPoll(t, cgTimeout, "the informer to see done", func() (bool, string) {
		_, ok, _ := inf.GetStore().GetByKey(ns + "/done")
		return ok, ""
	})
	if n := etcdtest.Watchers(t) - before; n != 2 {
		t.Fatalf("etcd has %v watchers for two replicas serving 30 watches and an informer (done at %s), want 2", n, done.ResourceVersion)
	}
}
