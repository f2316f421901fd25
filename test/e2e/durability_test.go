package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// cgAck is an acknowledged create.
type cgAck struct {
	uid types.UID
	rv  int64
}

// cgPost creates ev with a JSON POST and returns the HTTP status and the
// acknowledgement. It is safe to call from any goroutine.
func cgPost(ctx context.Context, cs kubernetes.Interface, ev *corev1.Event) (int, cgAck, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return 0, cgAck{}, err
	}
	code, raw, err := cgDo(ctx, cs.CoreV1().RESTClient().Post().Namespace(ev.Namespace).Resource("events").
		SetHeader("Content-Type", "application/json").Body(body))
	if err != nil {
		return code, cgAck{}, err
	}
	out := &corev1.Event{}
	if err := json.Unmarshal(raw, out); err != nil {
		return code, cgAck{}, fmt.Errorf("decoding the created event: %v", err)
	}
	if out.Name != ev.Name || out.UID == "" {
		return code, cgAck{}, fmt.Errorf("created %q with uid %q, asked for %q", out.Name, out.UID, ev.Name)
	}
	rv, err := strconv.ParseInt(out.ResourceVersion, 10, 64)
	if err != nil {
		return code, cgAck{}, fmt.Errorf("resourceVersion %q: %v", out.ResourceVersion, err)
	}
	return code, cgAck{uid: out.UID, rv: rv}, nil
}

// cgCheckAcked checks that every acknowledged create is stored as it was
// acknowledged, and returns the largest acknowledged resourceVersion.
func cgCheckAcked(t *testing.T, cs kubernetes.Interface, ns string, acked map[string]cgAck, exact bool) int64 {
	t.Helper()
	l, err := cs.CoreV1().Events(ns).List(cgCtx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list after restart: %v", err)
	}
	stored := map[string]corev1.Event{}
	for _, ev := range l.Items {
		stored[ev.Name] = ev
	}
	var maxRV int64
	missing := 0
	for name, a := range acked {
		maxRV = max(maxRV, a.rv)
		ev, ok := stored[name]
		if !ok {
			missing++
			if missing <= 10 {
				t.Errorf("acknowledged event %s (rv %d) is missing after the restart", name, a.rv)
			}
			continue
		}
		if ev.UID != a.uid || cgRV(t, ev.ResourceVersion) != a.rv {
			t.Errorf("event %s: uid/rv %s/%s after restart, acknowledged %s/%d", name, ev.UID, ev.ResourceVersion, a.uid, a.rv)
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged events missing", missing, len(acked))
	}
	if exact && len(stored) != len(acked) {
		t.Errorf("%d events stored, %d acknowledged", len(stored), len(acked))
	}
	if lrv := cgRV(t, l.ResourceVersion); lrv < maxRV {
		t.Errorf("list resourceVersion %d after restart is below the acknowledged %d", lrv, maxRV)
	}
	return maxRV
}

// TestDurabilityKill crashes eventsd (SIGKILL) right after 500 concurrent
// creates were acknowledged and expects all of them back.
func TestDurabilityKill(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	const (
		ns      = "durable"
		n       = 500
		workers = 32
	)
	ctx := cgCtx(t)
	jobs := make(chan int)
	var (
		mu    sync.Mutex
		acked = map[string]cgAck{}
		fails []string
		wg    sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				ev := cgCoreEvent(ns, fmt.Sprintf("ev-%04d", i), fmt.Sprintf("pod-%d", i%7))
				code, ack, err := cgPost(ctx, cs, ev)
				mu.Lock()
				if err != nil || code != 201 {
					fails = append(fails, fmt.Sprintf("%s: %d %v", ev.Name, code, err))
				} else {
					acked[ev.Name] = ack
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if len(fails) > 0 || len(acked) != n {
		t.Fatalf("%d creates acknowledged, %d failed: %v", len(acked), len(fails), fails[:min(len(fails), 5)])
	}
	rvs := map[int64]string{}
	for name, a := range acked {
		if other, dup := rvs[a.rv]; dup {
			t.Errorf("%s and %s were both acknowledged with resourceVersion %d", name, other, a.rv)
		}
		rvs[a.rv] = name
	}

	p.Kill()
	p.Restart()

	maxRV := cgCheckAcked(t, cs, ns, acked, true)
	nl, err := cs.EventsV1().Events(ns).List(cgCtx(t), metav1.ListOptions{})
	if err != nil || len(nl.Items) != n {
		t.Errorf("events.k8s.io list after restart: %d items, %v", len(nl.Items), err)
	}
	// Every event is readable on its own.
	names := make(chan string)
	var getErrs atomic.Int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				ev, err := cs.CoreV1().Events(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil || ev.UID != acked[name].uid || ev.Message != "message of "+name {
					getErrs.Add(1)
					t.Errorf("GET %s after restart: %+v %v", name, ev, err)
				}
			}
		}()
	}
	for name := range acked {
		names <- name
	}
	close(names)
	wg.Wait()

	// The revision did not go backwards.
	code, ack, err := cgPost(ctx, cs, cgCoreEvent(ns, "after-restart", "pod"))
	if err != nil || code != 201 {
		t.Fatalf("create after restart: %d %v", code, err)
	}
	if ack.rv <= maxRV {
		t.Errorf("create after restart got resourceVersion %d, not above the acknowledged %d", ack.rv, maxRV)
	}
	// And a watch resumes from an acknowledged revision.
	w := cgWatch(t)(cs.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: fmt.Sprint(maxRV)}))
	cgNextCore(t, w, watch.Added, "after-restart")
}

// TestDurabilityGracefulStop sends SIGTERM while creates are in flight: the
// process must exit 0 and every create answered 201 must survive.
func TestDurabilityGracefulStop(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	const (
		ns        = "graceful"
		workers   = 8
		perWorker = 2000 // a bound; the stop ends the loops long before
	)
	ctx := cgCtx(t)
	var (
		mu       sync.Mutex
		acked    = map[string]cgAck{}
		ackTimes []time.Time
		refused  atomic.Int64
		wg       sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				ev := cgCoreEvent(ns, fmt.Sprintf("g-%d-%04d", w, i), "pod")
				code, ack, err := cgPost(ctx, cs, ev)
				if err != nil || code != 201 {
					refused.Add(1)
					return // the server is going away
				}
				mu.Lock()
				acked[ev.Name] = ack
				ackTimes = append(ackTimes, time.Now())
				mu.Unlock()
			}
		}()
	}
	cgPoll(t, 30*time.Second, "100 acknowledged creates", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 100, fmt.Sprintf("%d acknowledged", len(acked))
	})
	sigterm := time.Now()
	p.Stop() // fails the test unless the process exits 0
	wg.Wait()
	mu.Lock()
	late := 0
	for _, at := range ackTimes {
		if at.After(sigterm) {
			late++
		}
	}
	t.Logf("%d creates acknowledged, %d of them after SIGTERM was sent; %d workers saw a failure", len(acked), late, refused.Load())
	mu.Unlock()
	if refused.Load() != workers {
		t.Errorf("%d of %d workers ended with a failure; the others ran out of work before the stop", refused.Load(), workers)
	}

	p.Restart()
	maxRV := cgCheckAcked(t, cs, ns, acked, false)
	code, ack, err := cgPost(ctx, cs, cgCoreEvent(ns, "after-restart", "pod"))
	if err != nil || code != 201 {
		t.Fatalf("create after restart: %d %v", code, err)
	}
	if ack.rv <= maxRV {
		t.Errorf("create after restart got resourceVersion %d, not above the acknowledged %d", ack.rv, maxRV)
	}
}

// cgSeen is a watch event with its arrival time.
type cgSeen struct {
	typ  watch.EventType
	name string
	uid  types.UID
	at   time.Time
}

// cgCollect drains w in the background; the returned function reports
// what has arrived so far.
func cgCollect(t *testing.T, w watch.Interface) func() []cgSeen {
	var (
		mu   sync.Mutex
		seen []cgSeen
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for e := range w.ResultChan() {
			s := cgSeen{typ: e.Type, at: time.Now()}
			if ev, ok := e.Object.(*corev1.Event); ok {
				s.name, s.uid = ev.Name, ev.UID
			}
			mu.Lock()
			seen = append(seen, s)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		w.Stop()
		<-done
	})
	return func() []cgSeen {
		mu.Lock()
		defer mu.Unlock()
		return append([]cgSeen(nil), seen...)
	}
}

func cgFind(seen []cgSeen, typ watch.EventType, name string) (cgSeen, bool) {
	for _, s := range seen {
		if s.typ == typ && s.name == name {
			return s, true
		}
	}
	return cgSeen{}, false
}

// TestTTLExpiry runs eventsd with --event-ttl=2s: an event nobody writes to
// disappears (watchers get DELETED), and PATCHes push expiry back.
func TestTTLExpiry(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	p := eventsdtest.Start(t, eventsdtest.Options{Args: []string{"--event-ttl=2s"}})
	cs := p.Clientset()
	ctx := cgCtx(t)
	const ns = "ttl"
	l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	seen := cgCollect(t, w)

	// "patched" is created first, so its original expiry comes before
	// "control"'s.
	begin := time.Now()
	patched := cgCreateCore(t, cs, cgCoreEvent(ns, "patched", "pod"))
	control := cgCreateCore(t, cs, cgCoreEvent(ns, "control", "pod"))
	created := time.Now()

	// Refresh "patched" twice, each time well within the TTL of the
	// previous write, as a recorder's repeated PATCHes do.
	var lastPatch time.Time
	for i, at := range []time.Duration{ttl / 2, ttl + ttl/4} {
		time.Sleep(time.Until(begin.Add(at)))
		lastPatch = time.Now()
		_, err := cs.CoreV1().Events(ns).Patch(ctx, "patched", types.StrategicMergePatchType,
			[]byte(fmt.Sprintf(`{"count":%d,"lastTimestamp":"2030-01-01T00:00:00Z","message":"again"}`, i+2)), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("PATCH %d, %v after the create: %v", i+1, lastPatch.Sub(begin), err)
		}
	}

	// "control" expires: DELETED within about 10 s of its creation.
	var ctrlGone cgSeen
	cgPoll(t, 10*time.Second, "DELETED control", func() (bool, string) {
		var ok bool
		ctrlGone, ok = cgFind(seen(), watch.Deleted, "control")
		return ok, fmt.Sprintf("%+v", seen())
	})
	if ctrlGone.uid != control.UID {
		t.Errorf("DELETED control uid %s, want %s", ctrlGone.uid, control.UID)
	}
	if d := ctrlGone.at.Sub(begin); d < ttl || ctrlGone.at.Sub(created) > 10*time.Second {
		t.Errorf("control deleted %v after its creation, want between %v and 10s", d, ttl)
	}
	_, err = cs.CoreV1().Events(ns).Get(ctx, "control", metav1.GetOptions{})
	cgAPIStatus(t, err, 404, metav1.StatusReasonNotFound)

	// "patched" is still there 1.5 s after its original expiry (which came
	// before control's), and after control's deletion.
	time.Sleep(time.Until(begin.Add(ttl + 1500*time.Millisecond)))
	if _, ok := cgFind(seen(), watch.Deleted, "patched"); ok {
		t.Errorf("patched event deleted before %v; its last PATCH was at %v", time.Since(begin), lastPatch.Sub(begin))
	} else if cur, err := cs.CoreV1().Events(ns).Get(ctx, "patched", metav1.GetOptions{}); err != nil || cur.Count != 3 {
		t.Errorf("patched event %v after creation (last PATCH at %v): %+v %v", time.Since(begin), lastPatch.Sub(begin), cur, err)
	}

	// ... and expires a TTL after its last PATCH.
	var pGone cgSeen
	cgPoll(t, 10*time.Second, "DELETED patched", func() (bool, string) {
		var ok bool
		pGone, ok = cgFind(seen(), watch.Deleted, "patched")
		return ok, fmt.Sprintf("%+v", seen())
	})
	if pGone.uid != patched.UID {
		t.Errorf("DELETED patched uid %s, want %s", pGone.uid, patched.UID)
	}
	if d := pGone.at.Sub(lastPatch); d < ttl-50*time.Millisecond || d > 10*time.Second {
		t.Errorf("patched event deleted %v after its last PATCH, want between the TTL %v and 10s", d, ttl)
	}
	_, err = cs.CoreV1().Events(ns).Get(ctx, "patched", metav1.GetOptions{})
	cgAPIStatus(t, err, 404, metav1.StatusReasonNotFound)
	var order []string
	for _, s := range seen() {
		order = append(order, string(s.typ)+" "+s.name)
	}
	cgEqualNames(t, "watch events", order, []string{"ADDED patched", "ADDED control", "MODIFIED patched", "MODIFIED patched", "DELETED control", "DELETED patched"})
	if l, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("events.k8s.io list after expiry: %v %v", cgNewNames(l.Items), err)
	}
	cgPoll(t, 5*time.Second, "eventsd_expired_events_total 2", func() (bool, string) {
		m := cgMetrics(t, p.URL, "")
		return m["eventsd_expired_events_total"] == 2 && m["eventsd_stored_events"] == 0,
			fmt.Sprintf("expired %v stored %v", m["eventsd_expired_events_total"], m["eventsd_stored_events"])
	})
}

// TestWatchResumeAcrossRestartShortLived: a watch resumed after a restart
// from a revision before an event was created, updated and deleted gets
// all three changes, as an etcd watch from that revision does.
func TestWatchResumeAcrossRestartShortLived(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	const ns = "resume"
	ctx := cgCtx(t)
	events := cs.CoreV1().Events(ns)
	before, err := events.Create(ctx, cgCoreEvent(ns, "before", "pod"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	short, err := events.Create(ctx, cgCoreEvent(ns, "short-lived", "pod"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	short.Count = 2
	if _, err := events.Update(ctx, short, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := events.Delete(ctx, "short-lived", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	p.Restart()
	w := cgWatch(t)(p.Clientset().CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion}))
	added := cgNextCore(t, w, watch.Added, "short-lived")
	if added.Count != 1 || added.ResourceVersion != short.ResourceVersion {
		t.Errorf("ADDED carries count %d at resourceVersion %s, want the created state (count 1 at %s)", added.Count, added.ResourceVersion, short.ResourceVersion)
	}
	if mod := cgNextCore(t, w, watch.Modified, "short-lived"); mod.Count != 2 {
		t.Errorf("MODIFIED carries count %d, want 2", mod.Count)
	}
	cgNextCore(t, w, watch.Deleted, "short-lived")
}
