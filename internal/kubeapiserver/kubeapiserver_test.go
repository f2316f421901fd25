package kubeapiserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubevents/kubevents/internal/etcdproc"
	"github.com/kubevents/kubevents/internal/eventsdtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// client-go keeps its transports (and their idle connections)
		// for the life of the process.
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// rss is the resident memory of process pid in MiB, from /proc (0 where
// there is none).
func rss(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// coreEvent is a core/v1 Event about pod name in ns.
func coreEvent(ns, name string) *corev1.Event {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-1", UID: "11111111-2222-3333-4444-555555555555", APIVersion: "v1"},
		Reason:         "BackOff",
		Message:        "Back-off restarting failed container web",
		Type:           corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
}

// next is the next event of w, failing the test after a timeout.
func next(t *testing.T, w watch.Interface, what string) watch.Event {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("%s: the watch ended", what)
		}
		return e
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no watch event in 30s", what)
	}
	return watch.Event{}
}

// TestKubeAPIServer: the harness runs a real kube-apiserver that client-go
// (both event groups) and kubectl (with the harness's kubeconfig and its
// contexts) write and read events through; its events survive a graceful
// restart and a SIGKILL, with the same resourceVersions, and a watch
// resumes across them. It also pins down, on the real server, what a
// mirror of a cluster's events depends on (the package comment's
// findings): WatchList for events, 410 for a compacted resourceVersion,
// and RBAC for a least-privilege reader.
func TestKubeAPIServer(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	c := Start(t, Options{
		SeparateEventsEtcd:     true,
		EtcdCompactionInterval: -1, // only the test compacts
		Users:                  []User{{Name: "mirror"}},
	})
	t.Logf("kube-apiserver %s (%s) ready in %v; RSS kube-apiserver %.0f MiB, etcd %.0f MiB, events etcd %.0f MiB",
		c.Version(), c.BinaryPath(), time.Since(t0).Round(time.Millisecond), rss(c.PID()), rss(c.EtcdPIDs()[0]), rss(c.EtcdPIDs()[1]))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}

	// /version is the version tools/kube-apiserver pins.
	info, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if info.GitVersion != c.Version() || !strings.HasPrefix(c.Version(), "v"+info.Major+"."+info.Minor+".") {
		t.Errorf("/version: %s (major %q minor %q), want %s", info.GitVersion, info.Major, info.Minor, c.Version())
	}
	if len(c.EtcdEndpoints()) != 2 || c.EventsEtcdEndpoint() != c.EtcdEndpoints()[1] {
		t.Errorf("etcd endpoints %v, events %s", c.EtcdEndpoints(), c.EventsEtcdEndpoint())
	}

	// Events need their namespace.
	const ns = "mirrored"
	if _, err := cs.CoreV1().Events(ns).Create(ctx, coreEvent(ns, "early"), metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("event in a namespace that does not exist: %v, want NotFound", err)
	}
	if err := c.EnsureNamespace(ctx, ns, "other"); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatalf("EnsureNamespace of an existing namespace: %v", err)
	}

	// Writes through both groups and kubectl.
	ce, err := cs.CoreV1().Events(ns).Create(ctx, coreEvent(ns, "web-1.core"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ee, err := cs.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "web-1.events", Namespace: ns},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "kubevents.io/test",
		ReportingInstance:   "test-1",
		Action:              "Pulling",
		Reason:              "Pulled",
		Regarding:           corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-1", APIVersion: "v1"},
		Note:                "Container image pulled",
		Type:                corev1.EventTypeNormal,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) string {
		t.Helper()
		r := eventsdtest.RunKubectl(ctx, t, c.Kubeconfig(), nil, args...)
		if r.Err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, r.Err, r.Stderr)
		}
		return r.Stdout
	}
	yaml := fmt.Sprintf(`apiVersion: v1
kind: Event
metadata: {name: web-1.kubectl, namespace: %s}
involvedObject: {kind: Pod, name: web-1, namespace: %s}
reason: Started
message: Started container web
type: Normal
count: 1
`, ns, ns)
	if r := eventsdtest.RunKubectl(ctx, t, c.Kubeconfig(), strings.NewReader(yaml), "create", "-f", "-"); r.Err != nil || !strings.Contains(r.Stdout, "event/web-1.kubectl created") {
		t.Fatalf("kubectl create: %v %s %s", r.Err, r.Stdout, r.Stderr)
	}

	// One storage: each group lists what both wrote.
	want := []string{"web-1.core", "web-1.events", "web-1.kubectl"}
	list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := coreNames(list.Items); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("core/v1 list: %v, want %v", got, want)
	}
	elist, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(elist.Items) != 3 {
		t.Fatalf("events.k8s.io/v1 list: %d items, want 3", len(elist.Items))
	}
	if out := kubectl("get", "events", "-n", ns, "-o", "name"); out != "event/web-1.core\nevent/web-1.events\nevent/web-1.kubectl\n" {
		t.Errorf("kubectl get events -o name:\n%s", out)
	}
	for _, e := range list.Items {
		if e.Name == "web-1.events" && (e.ReportingController != "kubevents.io/test" || e.Action != "Pulling" || e.UID != ee.UID) {
			t.Errorf("the events.k8s.io/v1 event as core/v1: %+v", e)
		}
	}

	// A watch from the list's resourceVersion sees a count update.
	w, err := cs.CoreV1().Events("").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	ce.Count = 2
	if ce, err = cs.CoreV1().Events(ns).Update(ctx, ce, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if e := next(t, w, "watch after the count update"); e.Type != watch.Modified || e.Object.(*corev1.Event).Count != 2 {
		t.Fatalf("watch: %s %+v, want MODIFIED with count 2", e.Type, e.Object)
	}
	w.Stop()

	t.Run("WatchList", func(t *testing.T) {
		// sendInitialEvents works for events (no watch cache): every
		// stored event ADDED, then a BOOKMARK annotated as the end of the
		// initial events, at a resourceVersion no older than the
		// namespace's newest event.
		yes := true
		w, err := cs.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{
			SendInitialEvents:    &yes,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
			AllowWatchBookmarks:  true,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		var added []string
		for {
			e := next(t, w, "WatchList")
			if e.Type == watch.Added {
				added = append(added, e.Object.(*corev1.Event).Name)
				continue
			}
			if e.Type != watch.Bookmark {
				t.Fatalf("WatchList: %s %+v before the bookmark", e.Type, e.Object)
			}
			m := e.Object.(*corev1.Event).ObjectMeta
			if m.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
				t.Fatalf("first bookmark without %s: %v", metav1.InitialEventsAnnotationKey, m.Annotations)
			}
			rv, _ := strconv.ParseInt(m.ResourceVersion, 10, 64)
			last, _ := strconv.ParseInt(ce.ResourceVersion, 10, 64)
			if rv < last {
				t.Errorf("initial-events-end bookmark at %d, before the last write %d", rv, last)
			}
			break
		}
		if strings.Join(added, " ") != strings.Join(want, " ") {
			t.Errorf("WatchList initial events %v, want %v", added, want)
		}
	})

	// Restarts keep everything, resourceVersions included, and a watch
	// resumes across them.
	before, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("graceful restart ready in %v", time.Since(t1).Round(time.Millisecond))
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if c.Running() {
		t.Fatal("kube-apiserver runs after Kill")
	}
	if _, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("a list succeeded with kube-apiserver killed")
	}
	t1 = time.Now()
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart after SIGKILL ready in %v", time.Since(t1).Round(time.Millisecond))
	after, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rvs(after.Items), rvs(before.Items); got != want {
		t.Errorf("after the restarts: %s, want %s", got, want)
	}
	w, err = cs.CoreV1().Events("").Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Events("other").Create(ctx, coreEvent("other", "after-restart"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if e := next(t, w, "watch resumed across restarts"); e.Type != watch.Added || e.Object.(*corev1.Event).Name != "after-restart" {
		t.Fatalf("resumed watch: %s %+v", e.Type, e.Object)
	}
	w.Stop()

	t.Run("LeastPrivilege", func(t *testing.T) {
		// A user with no role may not list events; a ClusterRole with
		// list and watch of events lets it list and watch in every
		// namespace, and nothing more.
		mcs, err := kubernetes.NewForConfig(c.UserConfig("mirror"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mcs.CoreV1().Events("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("list without a role: %v, want Forbidden", err)
		}
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "events-reader"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list", "watch"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "events-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "events-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mirror"}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// RBAC reads bindings through an informer: wait for it.
		deadline := time.Now().Add(30 * time.Second)
		for {
			l, err := mcs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
			if err == nil {
				if len(l.Items) != 4 {
					t.Errorf("the mirror user lists %d events, want 4", len(l.Items))
				}
				break
			}
			if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
				t.Fatalf("list with the ClusterRole: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		mw, err := mcs.CoreV1().Events("").Watch(ctx, metav1.ListOptions{ResourceVersion: after.ResourceVersion})
		if err != nil {
			t.Fatalf("watch with the ClusterRole: %v", err)
		}
		mw.Stop()
		if _, err := mcs.CoreV1().Events(ns).Create(ctx, coreEvent(ns, "by-mirror"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("create by the mirror user: %v, want Forbidden", err)
		}
		// The kubeconfig's context for the user says the same to kubectl.
		r := eventsdtest.RunKubectl(ctx, t, c.Kubeconfig(), nil, "--context", "mirror", "auth", "can-i", "watch", "events", "-A")
		if strings.TrimSpace(r.Stdout) != "yes" {
			t.Errorf("kubectl --context mirror auth can-i watch events -A: %q %v %s", r.Stdout, r.Err, r.Stderr)
		}
		r = eventsdtest.RunKubectl(ctx, t, c.Kubeconfig(), nil, "--context", "mirror", "auth", "can-i", "delete", "events", "-A")
		if strings.TrimSpace(r.Stdout) != "no" {
			t.Errorf("kubectl --context mirror auth can-i delete events -A: %q %v %s", r.Stdout, r.Err, r.Stderr)
		}
	})

	t.Run("Compacted", func(t *testing.T) {
		// After a compaction of the events etcd past a resourceVersion,
		// a watch from it is accepted (200) and its first event is an
		// ERROR with Status 410 Expired; a list at it answers 410 on the
		// request.
		old := before.ResourceVersion
		last, err := cs.CoreV1().Events("other").Create(ctx, coreEvent("other", "before-compaction"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rev, err := c.CompactEvents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Events' resourceVersions are the events etcd's revisions: the
		// last event written is its current revision.
		if strconv.FormatInt(rev, 10) != last.ResourceVersion {
			t.Errorf("events etcd at revision %d, the last event written at resourceVersion %s", rev, last.ResourceVersion)
		}
		t.Logf("events etcd compacted at revision %d; watching from %s", rev, old)
		w, err := cs.CoreV1().Events("").Watch(ctx, metav1.ListOptions{ResourceVersion: old})
		if err != nil {
			t.Fatalf("watch from a compacted resourceVersion refused on the request: %v (expected the 410 in the stream)", err)
		}
		defer w.Stop()
		e := next(t, w, "watch from a compacted resourceVersion")
		st, ok := e.Object.(*metav1.Status)
		if e.Type != watch.Error || !ok || st.Code != 410 || st.Reason != metav1.StatusReasonExpired {
			t.Fatalf("watch from a compacted resourceVersion: %s %+v, want ERROR 410 Expired", e.Type, e.Object)
		}
		t.Logf("watch from %s: ERROR %d %s %q", old, st.Code, st.Reason, st.Message)
		select {
		case e, ok := <-w.ResultChan():
			if ok {
				t.Errorf("after the ERROR: %s %+v, want the watch ended", e.Type, e.Object)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("the watch did not end within 30s of its ERROR")
		}
		_, err = cs.CoreV1().Events("").List(ctx, metav1.ListOptions{ResourceVersion: old, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		if !apierrors.IsResourceExpired(err) {
			t.Errorf("list at a compacted resourceVersion: %v, want 410 Expired", err)
		} else {
			t.Logf("list at %s: %v", old, err)
		}
		// From the compaction's revision on, watching works.
		w2, err := cs.CoreV1().Events("").Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(rev, 10)})
		if err != nil {
			t.Fatal(err)
		}
		defer w2.Stop()
		if _, err := cs.CoreV1().Events("other").Create(ctx, coreEvent("other", "after-compaction"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if e := next(t, w2, "watch from the compaction revision"); e.Type != watch.Added || e.Object.(*corev1.Event).Name != "after-compaction" {
			t.Fatalf("watch from the compaction revision: %s %+v", e.Type, e.Object)
		}
	})

	// The kubeconfig is one clientcmd reads: the admin's context is
	// current, and there is one per user.
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != AdminUser || cfg.Contexts["mirror"] == nil {
		t.Errorf("kubeconfig: current context %q, contexts %v", cfg.CurrentContext, cfg.Contexts)
	}
	t.Logf("after the test: RSS kube-apiserver %.0f MiB, etcd %.0f MiB, events etcd %.0f MiB", rss(c.PID()), rss(c.EtcdPIDs()[0]), rss(c.EtcdPIDs()[1]))
}

// coreNames are the names of events, in order.
func coreNames(items []corev1.Event) []string {
	var out []string
	for _, e := range items {
		out = append(out, e.Name)
	}
	return out
}

// rvs is each event's namespace, name, uid and resourceVersion.
func rvs(items []corev1.Event) string {
	var b strings.Builder
	for _, e := range items {
		fmt.Fprintf(&b, "%s/%s %s %s; ", e.Namespace, e.Name, e.UID, e.ResourceVersion)
	}
	return b.String()
}

// TestEventsWatch: on a second cluster, alongside TestKubeAPIServer (its
// waits are idle): with a short --event-ttl an event expires on schedule
// (its etcd lease), and a watcher sees the expiry as an ordinary DELETED,
// what a mirror keeping history must not propagate by default; and a
// watch of events gets no BOOKMARK while one of a cached resource
// (configmaps) with the same parameters gets them (every minute and 2 s
// before its timeout, once the cache is past the watch's revision):
// events have no watch cache, and bookmarks come from the watch cache.
func TestEventsWatch(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	c := Start(t, Options{EventTTL: ttl, EtcdCompactionInterval: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	// Bookmarks: two watches over 15 s (the cache's bookmark comes 2 s
	// before the end), counted at the end.
	timeout := int64(15)
	type counts struct{ bookmarks, others int }
	count := func(w watch.Interface) <-chan counts {
		ch := make(chan counts, 1)
		go func() {
			var n counts
			for e := range w.ResultChan() {
				if e.Type == watch.Bookmark {
					n.bookmarks++
				} else {
					n.others++
				}
			}
			ch <- n
		}()
		return ch
	}
	evs, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ew, err := cs.CoreV1().Events("").Watch(ctx, metav1.ListOptions{AllowWatchBookmarks: true, TimeoutSeconds: &timeout, ResourceVersion: evs.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer ew.Stop()
	cms, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cw, err := cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{AllowWatchBookmarks: true, TimeoutSeconds: &timeout, ResourceVersion: cms.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Stop()
	eCount, cCount := count(ew), count(cw)
	// The watch cache sends a watcher a bookmark only at a revision past
	// the one it started from, and learns of revisions through changes to
	// its resource or etcd progress notifications: write (the namespace,
	// the event below), then list configmaps consistently, which has the
	// cache ask etcd for progress and so reach the current revision.
	if err := c.EnsureNamespace(ctx, "ttl"); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}

	// TTL.
	ev, err := cs.CoreV1().Events("ttl").Create(ctx, coreEvent("ttl", "short-lived"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	w, err := cs.CoreV1().Events("ttl").Watch(ctx, metav1.ListOptions{ResourceVersion: ev.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	e := next(t, w, "watch for the expiry")
	if e.Type != watch.Deleted || e.Object.(*corev1.Event).Name != "short-lived" {
		t.Fatalf("watch: %s %+v, want DELETED of short-lived", e.Type, e.Object)
	}
	// Never before the TTL; etcd checks leases every 500 ms.
	if age := time.Since(created); age < ttl-time.Second {
		t.Errorf("expired %v after the create, TTL %v", age, ttl)
	} else {
		t.Logf("DELETED %v after the create (TTL %v)", age.Round(time.Millisecond), ttl)
	}
	if _, err := cs.CoreV1().Events("ttl").Get(ctx, "short-lived", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after the expiry: %v, want NotFound", err)
	}

	en, cn := <-eCount, <-cCount
	t.Logf("over a %ds watch: events %d bookmarks (%d other events), configmaps %d bookmarks (%d other)", timeout, en.bookmarks, en.others, cn.bookmarks, cn.others)
	if en.bookmarks != 0 {
		t.Errorf("the events watch got %d bookmarks, want none (no watch cache)", en.bookmarks)
	}
	if en.others != 2 {
		t.Errorf("the events watch got %d other events, want 2 (ADDED and DELETED)", en.others)
	}
	if cn.bookmarks == 0 {
		t.Errorf("the configmaps watch got no bookmark: the comparison says nothing")
	}
}

// TestLaunchFailure: a kube-apiserver that cannot start (a flag it does
// not know) makes Launch fail with kube-apiserver's own words, and leaves
// no process behind (the etcd it started is killed).
func TestLaunchFailure(t *testing.T) {
	RequireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	c, err := Launch(ctx, Options{Dir: dir, ExtraArgs: []string{"--no-such-flag"}})
	if err == nil {
		c.Close()
		t.Fatal("Launch with an unknown kube-apiserver flag succeeded")
	}
	if !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("Launch error does not say kube-apiserver exited, and why: %v", err)
	}
	// Every process Launch started has dir in its command line.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), dir) {
			t.Errorf("still running after the failed Launch: %s", strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}

// TestCallersEventsEtcd: with Options.EventsEtcdURL, kube-apiserver keeps
// events in the caller's etcd (and nothing else there), the cluster does
// not stop that etcd on Close, and with Options.Binary the given binary
// runs, its version read from --version.
func TestCallersEventsEtcd(t *testing.T) {
	t.Parallel()
	b := RequireBinaries(t)
	theirs := etcdproc.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := Launch(ctx, Options{EventsEtcdURL: theirs.Endpoint(0), EventsEtcdAddress: "127.0.0.1:1"}); err == nil {
		t.Fatal("Launch with both EventsEtcdURL and EventsEtcdAddress succeeded")
	}
	c, err := Launch(ctx, Options{Dir: t.TempDir(), EventsEtcdURL: theirs.Endpoint(0), Binary: b.Path, ExtraArgs: []string{"--etcd-prefix=/kas"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Version() != b.Version || c.BinaryPath() != b.Path {
		t.Errorf("runs %s version %q, want %s version %q", c.BinaryPath(), c.Version(), b.Path, b.Version)
	}
	if eps := c.EtcdEndpoints(); len(eps) != 2 || eps[1] != theirs.Endpoint(0) || c.EventsEtcdEndpoint() != theirs.Endpoint(0) {
		t.Errorf("etcd endpoints %v (events %s), want the main one then %s", eps, c.EventsEtcdEndpoint(), theirs.Endpoint(0))
	}
	if pids := c.EtcdPIDs(); len(pids) != 1 || pids[0] == theirs.PID(0) {
		t.Errorf("etcd pids %v: want only the main etcd's, not the caller's %d", pids, theirs.PID(0))
	}
	if err := c.EnsureNamespace(ctx, "callers"); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Events("callers").Create(ctx, coreEvent("callers", "in-theirs"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{theirs.Endpoint(0)}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	all, err := cli.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range all.Kvs {
		keys = append(keys, string(kv.Key))
	}
	if len(keys) != 1 || keys[0] != "/kas/events/callers/in-theirs" {
		t.Errorf("the caller's etcd holds %q, want only the event", keys)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !theirs.Running(0) {
		t.Error("Close stopped the caller's etcd")
	}
	if _, err := cli.Get(ctx, "/kas/events/callers/in-theirs"); err != nil {
		t.Errorf("the caller's etcd after Close: %v", err)
	}
}
