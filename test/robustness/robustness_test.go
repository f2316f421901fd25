package robustness

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/export/webhook/webhooktest"
	"github.com/kubevents/kubevents/internal/etcdproc"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

// bookmarkEvery is the replicas' --watch-bookmark-interval: short, so
// that watches get bookmarks between their events.
const bookmarkEvery = 250 * time.Millisecond

// env is a system under test: its replicas and its fault.
type env struct {
	urls []string
	// window is the store's history window (for the 410 check).
	window time.Duration
	// exactPast: the store serves Exact lists at past revisions (etcd).
	exactPast bool
	// inject and recover the fault; each returns what it did.
	inject, recover func(t *testing.T) string
	// traffic adjusts the traffic's configuration.
	traffic func(*TrafficConfig)
	// extra adds scenario-specific ops and checks once a round's history
	// is recorded and its observer has caught up.
	extra func(t *testing.T, h *History, tr *Traffic) []Violation
	// setup, when set, runs before each round (a system of its own per
	// round).
	setup func(t *testing.T)
	// rec is the running round's recorder.
	rec *Recorder
	// restarts are the recorder times of the round's kills of a pebble
	// eventsd (see CheckConfig.Restarts); noteKill records one.
	restarts []int64
}

// noteKill records that the store's process is killed now.
func (e *env) noteKill() { e.restarts = append(e.restarts, e.rec.Now()) }

// seeds are the short profile's seeds for a scenario: a fixed one (a hash
// of its name) and a random one, or -robustness.seed alone.
func seeds(name string) []uint64 {
	if *flagSeed != 0 {
		return []uint64{*flagSeed}
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return []uint64{h.Sum64() % 1_000_000, rand.Uint64() % 1_000_000}
}

// totals are what a scenario checked, for the report.
type totals struct {
	rounds, ops, checked, lists, watches, events, faults int
}

// run runs rounds of traffic against e: the short profile's seeds, or
// rounds with random seeds for -robustness.duration.
func run(t *testing.T, name string, e *env) {
	var tot totals
	start := time.Now()
	if *flagDuration > 0 {
		for i := 0; time.Since(start) < *flagDuration && !t.Failed(); i++ {
			round(t, e, fmt.Sprintf("%s-%d", name, i), rand.Uint64()%1_000_000, &tot)
		}
	} else {
		for i, seed := range seeds(name) {
			round(t, e, fmt.Sprintf("%s-%d", name, i), seed, &tot)
		}
	}
	t.Logf("ROBUSTNESS %s: %d rounds in %v, %d faults: %d ops (%d linearized, %d lists), %d watches, %d watch events",
		name, tot.rounds, time.Since(start).Round(time.Second), tot.faults, tot.ops, tot.checked, tot.lists, tot.watches, tot.events)
}

// round runs traffic in a namespace of its own for -robustness.round,
// injecting e's fault at a third and removing it at two thirds; then has
// a sentinel written, waits for the observer to see it, and checks the
// whole history.
func round(t *testing.T, e *env, ns string, seed uint64, tot *totals) {
	t.Helper()
	ns = strings.ToLower(strings.ReplaceAll(ns, "_", "-"))
	t.Logf("round %s: seed %d (replay with -robustness.seed=%d)", ns, seed, seed)
	if e.setup != nil {
		e.setup(t)
	}
	rec := NewRecorder()
	e.rec, e.restarts = rec, nil
	cfg := TrafficConfig{Namespace: ns, Seed: seed}
	if e.traffic != nil {
		e.traffic(&cfg)
	}
	tr, err := NewTraffic(cfg, rec, e.urls)
	if err != nil {
		t.Fatal(err)
	}
	from := startRevision(t, e.urls)
	ob := tr.Observe(from)
	defer ob.Stop()

	ctx, cancel := context.WithTimeout(t.Context(), *flagRound)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { tr.Run(ctx) })
	if e.inject != nil {
		sleepCtx(ctx, *flagRound/3)
		t.Logf("round %s: at %v: %s", ns, time.Duration(rec.Now()), e.inject(t))
		sleepCtx(ctx, *flagRound/3)
		t.Logf("round %s: at %v: %s", ns, time.Duration(rec.Now()), e.recover(t))
		tot.faults++
	}
	wg.Wait()

	sctx, scancel := context.WithTimeout(t.Context(), time.Minute)
	defer scancel()
	sentinel, err := tr.Sentinel(sctx, "sentinel", time.Minute)
	if err != nil {
		t.Fatalf("round %s (seed %d): %v", ns, seed, err)
	}
	deadline := time.Now().Add(time.Minute)
	for ob.Reached() < sentinel && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	ob.Stop()
	h := rec.History()
	var extra []Violation
	if e.extra != nil {
		extra = e.extra(t, &h, tr)
	}
	r := Check(h, CheckConfig{HistoryWindow: e.window, ExactPast: e.exactPast, Restarts: e.restarts})
	r.Violations = append(r.Violations, extra...)
	if r.Covered[ns] < sentinel {
		r.Violations = append(r.Violations, Violation{"reliable",
			fmt.Sprintf("watches without selector delivered every change only up to revision %d, not to the sentinel's %d", r.Covered[ns], sentinel)})
	}
	unknown := 0
	for _, o := range h.Ops {
		if o.Outcome == Unknown || o.Outcome == Failed {
			unknown++
		}
	}
	t.Logf("round %s: %s; %d ops failed or went unanswered", ns, r.Summary(), unknown)
	if len(r.TimedOut) > 0 {
		t.Logf("round %s: porcupine did not decide %v in time", ns, r.TimedOut)
	}
	if len(r.Violations) > 0 {
		t.Errorf("round %s (seed %d, replay with -robustness.seed=%d): %s", ns, seed, seed, r)
	}
	tot.rounds++
	tot.ops += r.Ops
	tot.checked += r.Checked
	tot.lists += r.Lists
	tot.watches += r.Watches
	tot.events += r.WatchEvents
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// startRevision is the revision of a list on some replica: every change
// of a new namespace comes after it. On an empty store (revision 0, from
// which a watch would start with the current state) it creates an event
// elsewhere first.
func startRevision(t *testing.T, urls []string) int64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		for _, u := range urls {
			cs, err := kubernetes.NewForConfig(&rest.Config{Host: u, QPS: -1, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			l, err := cs.CoreV1().Events("kube-system").List(t.Context(), metav1.ListOptions{Limit: 1})
			if err == nil && l.ResourceVersion == "0" {
				ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "genesis"},
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "kube-system", Name: "p"},
					Reason:         "Genesis", Message: "first", Type: corev1.EventTypeNormal}
				_, err = cs.CoreV1().Events("kube-system").Create(t.Context(), ev, metav1.CreateOptions{})
				continue
			}
			if err == nil {
				var rev int64
				if _, err = fmt.Sscan(l.ResourceVersion, &rev); err == nil {
					return rev
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no replica lists: %v", err)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processArgs are every eventsd process's flags.
func processArgs(extra ...string) []string {
	return append([]string{"--watch-bookmark-interval=" + bookmarkEvery.String()}, extra...)
}

// TestPebbleKill: one eventsd on pebble, killed with SIGKILL under
// traffic and restarted over its data directory.
func TestPebbleKill(t *testing.T) {
	p := eventsdtest.Start(t, eventsdtest.Options{Args: processArgs()})
	e := &env{
		urls:    []string{p.URL},
		window:  pebblestore.DefaultHistoryWindow,
		recover: func(*testing.T) string { p.Restart(); return "eventsd restarted" },
	}
	e.inject = func(*testing.T) string { p.Kill(); e.noteKill(); return "eventsd killed (SIGKILL)" }
	run(t, "pebble-kill", e)
}

// etcdReplicas starts n eventsd replicas over the etcd at servers.
func etcdReplicas(t *testing.T, n int, servers ...string) []*eventsdtest.Process {
	var ps []*eventsdtest.Process
	for range n {
		ps = append(ps, eventsdtest.Start(t, eventsdtest.Options{Args: processArgs(
			"--storage-backend=etcd", "--etcd-servers="+strings.Join(servers, ","), "--etcd-prefix=/registry")}))
	}
	return ps
}

func urlsOf(ps []*eventsdtest.Process) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.URL)
	}
	return out
}

// etcdWindow: eventsd compacts etcd every 5 minutes to the revision seen
// one interval earlier: a revision is kept at least that long.
const etcdWindow = 5 * time.Minute

// TestEtcdReplicaKill: two eventsd replicas over one etcd; one is killed
// with SIGKILL under traffic and restarted.
func TestEtcdReplicaKill(t *testing.T) {
	c := etcdproc.Start(t, 1)
	ps := etcdReplicas(t, 2, c.Endpoints()...)
	run(t, "etcd-replica-kill", &env{
		urls:      urlsOf(ps),
		window:    etcdWindow,
		exactPast: true,
		inject:    func(*testing.T) string { ps[0].Kill(); return "replica 0 killed (SIGKILL)" },
		recover:   func(*testing.T) string { ps[0].Restart(); return "replica 0 restarted" },
	})
}

// TestEtcdLeaderKill: two replicas over three etcd members; the etcd
// leader is killed with SIGKILL under traffic and restarted.
func TestEtcdLeaderKill(t *testing.T) {
	c := etcdproc.Start(t, 3)
	ps := etcdReplicas(t, 2, c.Endpoints()...)
	var leader int
	run(t, "etcd-leader-kill", &env{
		urls:      urlsOf(ps),
		window:    etcdWindow,
		exactPast: true,
		inject: func(t *testing.T) string {
			var err error
			if leader, err = c.Leader(t.Context()); err != nil {
				t.Fatal(err)
			}
			c.Kill(leader)
			return fmt.Sprintf("etcd leader %d killed (SIGKILL)", leader)
		},
		recover: func(*testing.T) string { c.Restart(leader); return fmt.Sprintf("etcd member %d restarted", leader) },
	})
}

// TestEtcdMemberPause: two replicas over three etcd members; the leader
// is paused (SIGSTOP) under traffic, then resumed (SIGCONT).
func TestEtcdMemberPause(t *testing.T) {
	c := etcdproc.Start(t, 3)
	ps := etcdReplicas(t, 2, c.Endpoints()...)
	var resume func()
	run(t, "etcd-member-pause", &env{
		urls:      urlsOf(ps),
		window:    etcdWindow,
		exactPast: true,
		inject: func(t *testing.T) string {
			leader, err := c.Leader(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			resume = pause(t, c.PID(leader))
			return fmt.Sprintf("etcd leader %d paused (SIGSTOP)", leader)
		},
		recover: func(*testing.T) string { resume(); return "etcd member resumed (SIGCONT)" },
	})
}

// TestEtcdNetworkCut: two replicas over one etcd, replica 0 through a
// TCP proxy that cuts its connections to etcd (resets them, refuses new
// ones) under traffic, then lets them through again.
func TestEtcdNetworkCut(t *testing.T) {
	c := etcdproc.Start(t, 1)
	px := newProxy(t, strings.TrimPrefix(c.Endpoint(0), "http://"))
	ps := etcdReplicas(t, 1, "http://"+px.Addr())
	ps = append(ps, etcdReplicas(t, 1, c.Endpoints()...)...)
	run(t, "etcd-network-cut", &env{
		urls:      urlsOf(ps),
		window:    etcdWindow,
		exactPast: true,
		inject:    func(*testing.T) string { px.Cut(); return "replica 0's network to etcd cut" },
		recover:   func(*testing.T) string { px.Restore(); return "replica 0's network to etcd restored" },
	})
}

// TestPebbleFullDisk: eventsd's server and pebblestore in process, on a
// filesystem that reports itself full for a third of each round: writes
// get 507 and must change nothing; reads and watches go on.
func TestPebbleFullDisk(t *testing.T) {
	fs := &diskFS{FS: vfs.Default}
	url, _ := inProcess(t, pebblestore.Options{Dir: t.TempDir(), FS: fs}, server.Config{BookmarkInterval: bookmarkEvery})
	run(t, "pebble-full-disk", &env{
		urls:    []string{url},
		window:  pebblestore.DefaultHistoryWindow,
		inject:  func(*testing.T) string { fs.full.Store(true); return "disk full" },
		recover: func(*testing.T) string { fs.full.Store(false); return "disk space freed" },
	})
}

// clockStep is one jump of the store's fake clock: the recorder's times
// just before and after it, and the clock's value after it.
type clockStep struct {
	before, after int64
	to            time.Time
}

// ttlClock is the TTL scenario's fake clock and its jumps.
type ttlClock struct {
	clk   *clocktesting.FakeClock
	start time.Time
	mu    sync.Mutex
	steps []clockStep
}

func (c *ttlClock) step(rec *Recorder, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := rec.Now()
	c.clk.Step(d)
	c.steps = append(c.steps, clockStep{b, rec.Now(), c.clk.Now()})
}

// min is the clock's value certainly reached by recorder time at, and max
// the highest it may have had by then.
func (c *ttlClock) min(at int64) time.Time {
	v := c.start
	for _, s := range c.steps {
		if s.after <= at {
			v = s.to
		}
	}
	return v
}

func (c *ttlClock) max(at int64) time.Time {
	v := c.start
	for _, s := range c.steps {
		if s.before <= at {
			v = s.to
		}
	}
	return v
}

// TestPebbleTTLClockJumps: eventsd's server and pebblestore in process,
// the store on a fake clock that jumps by 4 to 8 minutes twice a round,
// with a 10-minute TTL and no deletes by clients: every deletion the
// watches see is an expiry. Each expiry is added to the history as an
// operation (from the first jump that made its event due to its first
// sighting) and checked with the rest; besides, no event expires before
// its TTL has passed since its last write on the fake clock, and every
// event whose TTL has passed by the end of the round is gone.
func TestPebbleTTLClockJumps(t *testing.T) {
	const ttl = 10 * time.Minute
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var (
		tc   *ttlClock
		stop func()
	)
	e := &env{
		window:  time.Hour, // the store keeps 24 h of history on the fake clock
		traffic: func(c *TrafficConfig) { c.NoDeletes = true },
	}
	// One store per round: each round's clock starts at start.
	e.setup = func(t *testing.T) {
		if stop != nil {
			stop()
		}
		tc = &ttlClock{clk: clocktesting.NewFakeClock(start), start: start}
		var url string
		url, stop = inProcess(t, pebblestore.Options{Dir: t.TempDir(), Clock: tc.clk, DefaultTTL: ttl, HistoryWindow: 24 * time.Hour},
			server.Config{EventTTL: ttl, BookmarkInterval: bookmarkEvery})
		e.urls = []string{url}
	}
	e.inject = func(*testing.T) string {
		d := time.Duration(4+rand.IntN(5)) * time.Minute
		tc.step(e.rec, d)
		return "store clock stepped by " + d.String()
	}
	e.recover = e.inject
	e.extra = func(t *testing.T, h *History, tr *Traffic) []Violation {
		return checkExpiries(t, h, tc, ttl, tr)
	}
	run(t, "pebble-ttl", e)
}

// checkExpiries adds every expiry of h (each deletion: clients delete
// nothing) to h as an Expire operation, and checks that none came before
// its event's TTL had passed on the fake clock, and that every event due
// by the end is gone (waiting for the store's expiry, which runs on the
// fake clock's ticks, to reach it).
func checkExpiries(t *testing.T, h *History, tc *ttlClock, ttl time.Duration, tr *Traffic) []Violation {
	t.Helper()
	var vs []Violation
	l, _ := BuildChangeLog(*h)
	writes := map[string]*Op{}
	for _, o := range h.Ops {
		if o.Msg != "" {
			writes[o.Msg] = o
		}
	}
	seen := map[int64]int64{}
	for _, w := range h.Watches {
		for _, ev := range w.Events {
			if ev.Type == "DELETED" {
				if at, ok := seen[ev.Rev]; !ok || ev.At < at {
					seen[ev.Rev] = ev.At
				}
			}
		}
	}
	ns := tr.cfg.Namespace
	var last int64
	for _, c := range l.Changes(ns) {
		last = c.Rev
		if !c.Deleted {
			continue
		}
		w, ok := writes[c.Msg]
		if !ok {
			vs = append(vs, Violation{"ttl", fmt.Sprintf("expiry %v of a state no client wrote", c)})
			continue
		}
		at, ok := seen[c.Rev]
		if !ok {
			continue // learned from an acknowledgement only: cannot be
		}
		due := tc.min(w.Call).Add(ttl)
		if tc.max(at).Before(due) {
			vs = append(vs, Violation{"ttl", fmt.Sprintf("%s/%s expired at revision %d with the clock at most %v, before %v (the TTL after its write %s)",
				ns, c.Name, c.Rev, tc.max(at).Sub(tc.start), due.Sub(tc.start), w)})
		}
		call := w.Call
		for _, s := range tc.steps {
			if !s.to.Before(due) {
				call = s.before
				break
			}
		}
		h.Ops = append(h.Ops, &Op{ID: len(h.Ops), Client: -2, Kind: Expire, Namespace: ns, Name: c.Name,
			Call: call, Return: at, Outcome: OK, Rev: c.Rev})
	}
	end := tc.min(math.MaxInt64)
	for name, obj := range l.StateAt(ns, last) {
		w, ok := writes[obj.Msg]
		if !ok || w.Return == Never || tc.max(w.Return).Add(ttl).After(end) {
			continue
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := tr.clients[0].CoreV1().Events(ns).Get(t.Context(), name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				vs = append(vs, Violation{"ttl", fmt.Sprintf("%s/%s, written by %s, not expired with the clock at %v (%v after the write returned): %v",
					ns, name, w, end.Sub(tc.start), end.Sub(tc.max(w.Return)), err)})
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return vs
}

// TestPebbleExportKill: one eventsd on pebble exporting every change
// (deletions included) to a webhook receiver on loopback, in small
// batches. A third into each round the receiver answers 503, eventsd is
// killed (SIGKILL) while a batch waits to be acknowledged and restarted,
// and the receiver goes down (connections refused); at two thirds the
// receiver comes back, and eventsd is killed as the receiver
// acknowledges a batch, before the answer reaches it, and restarted
// (the batch is sent again from the saved cursor). At the end the
// round waits for the receiver to have the sentinel's change and checks
// what it received against the change log (CheckExport).
func TestPebbleExportKill(t *testing.T) {
	var (
		p       *eventsdtest.Process
		killing atomic.Pointer[chan struct{}]
	)
	rcv := webhooktest.New(t, webhooktest.Options{Observe: func([]string) {
		// Called as the receiver answers 2xx, before the answer is
		// written out: a kill here is a crash between the sink's
		// acknowledgement and eventsd's cursor save.
		if ch := killing.Swap(nil); ch != nil {
			p.Kill()
			close(*ch)
		}
	}})
	cfg := filepath.Join(t.TempDir(), "export.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: eventsd.kubevents.io/v1alpha1
kind: ExportConfiguration
sinks:
- name: hist
  filter: {deletions: true}
  batch: {maxRecords: 8, maxWait: 100ms}
  webhook: {url: "`+rcv.URL()+`", timeout: 5s}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p = eventsdtest.Start(t, eventsdtest.Options{Args: processArgs("--export-config=" + cfg)})
	var kills int
	e := &env{urls: []string{p.URL}, window: pebblestore.DefaultHistoryWindow}
	// A third into a round: the receiver fails (503), eventsd is killed
	// while a batch waits to be acknowledged, restarted, and the
	// receiver goes down.
	e.inject = func(t *testing.T) string {
		seen := len(rcv.Requests())
		rcv.FailNext(-1, http.StatusServiceUnavailable, "")
		what := "receiver answering 503"
		if !waitRequest(rcv, seen, http.StatusServiceUnavailable, 10*time.Second) {
			what += " (no batch sent in 10s)"
		}
		p.Kill()
		e.noteKill()
		kills++
		p.Restart()
		rcv.Down()
		return what + "; eventsd killed (SIGKILL) with a batch unacknowledged, restarted; receiver down"
	}
	// At two thirds: the receiver comes back, and eventsd is killed as
	// the receiver acknowledges a batch, then restarted.
	e.recover = func(t *testing.T) string {
		done := make(chan struct{})
		killing.Store(&done)
		rcv.Heal()
		if err := rcv.Up(); err != nil {
			t.Fatal(err)
		}
		what := "receiver up and answering 200; eventsd killed (SIGKILL) as the receiver acknowledged a batch"
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			if killing.Swap(nil) == nil {
				<-done // the kill began just now
			} else {
				p.Kill()
				what = "receiver up and answering 200; no batch acknowledged in 10s; eventsd killed (SIGKILL)"
			}
		}
		e.noteKill()
		kills++
		p.Restart()
		return what + ", restarted"
	}
	e.extra = func(t *testing.T, h *History, tr *Traffic) []Violation {
		return checkExported(t, h, tr.cfg.Namespace, rcv, p, kills)
	}
	run(t, "pebble-export-kill", e)
}

// waitRequest waits up to d for the receiver to answer a request after
// its first seen ones with status, and says whether it did.
func waitRequest(rcv *webhooktest.Receiver, seen, status int, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, q := range rcv.Requests()[seen:] {
			if q.Status == status {
				return true
			}
		}
	}
	return false
}

// lostRE finds the exporter's log of lost history: the revisions
// (cursor, resumeAt] never reach the sink.
var lostRE = regexp.MustCompile(`changes lost.* cursor=(\d+) resumeAt=(\d+)`)

// checkExported waits (a minute at most) until the receiver has
// acknowledged a record of ns at or past its last change in h, then
// checks every request it got against h's change log.
func checkExported(t *testing.T, h *History, ns string, rcv *webhooktest.Receiver, p *eventsdtest.Process, kills int) []Violation {
	t.Helper()
	l, _ := BuildChangeLog(*h) // its violations are Check's to report
	cs := l.Changes(ns)
	if len(cs) == 0 {
		return []Violation{{"export", "no change in the round"}}
	}
	until := cs[len(cs)-1].Rev
	var vs []Violation
	deadline := time.Now().Add(time.Minute)
	for !exportedTo(rcv, ns, until) {
		if time.Now().After(deadline) {
			vs = append(vs, Violation{"export", fmt.Sprintf("the receiver has not got revision %d (the round's last change) a minute after it", until)})
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var lost []RevRange
	for _, m := range lostRE.FindAllStringSubmatch(p.Logs(), -1) {
		from, _ := strconv.ParseInt(m[1], 10, 64)
		to, _ := strconv.ParseInt(m[2], 10, 64)
		lost = append(lost, RevRange{from, to})
	}
	var batches []ExportBatch
	for _, q := range rcv.Requests() {
		if q.Records != nil {
			batches = append(batches, ExportBatch{Records: q.Records, Acked: q.Status/100 == 2})
		}
	}
	r := CheckExport(l, batches, ExportCheck{Namespace: ns, Until: until, Lost: lost})
	t.Logf("round %s: %s; %d eventsd kills so far, %d lost ranges logged", ns, r.Summary(), kills, len(lost))
	return append(vs, r.Violations...)
}

// exportedTo says whether the receiver acknowledged a record of ns at
// revision until or later.
func exportedTo(rcv *webhooktest.Receiver, ns string, until int64) bool {
	for _, rec := range rcv.Records() {
		if rec.Event != nil && rec.Event.Namespace == ns && rec.Revision >= until {
			return true
		}
	}
	return false
}
