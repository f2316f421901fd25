package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/kubeapiserver"
	"github.com/kubevents/kubevents/mirror"
)

// mrSeen records the (name, count) of every ADDED and MODIFIED a watch
// delivers, resuming across disconnects from the last resourceVersion
// (client-go's RetryWatcher), as a consumer of eventsd would.
type mrSeen struct {
	mu     sync.Mutex
	counts map[string][]int32
	done   chan struct{}
}

func mrFollow(t *testing.T, ctx context.Context, cs kubernetes.Interface, fromRV string) *mrSeen {
	t.Helper()
	s := &mrSeen{counts: map[string][]int32{}, done: make(chan struct{})}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, fromRV, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Events("").Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.done)
		for ev := range rw.ResultChan() {
			e, ok := ev.Object.(*corev1.Event)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			s.mu.Lock()
			k := e.Namespace + "/" + e.Name
			if c := s.counts[k]; len(c) == 0 || c[len(c)-1] != e.Count {
				s.counts[k] = append(c, e.Count)
			}
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { rw.Stop(); <-s.done })
	return s
}

func (s *mrSeen) get(k string) []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.counts[k])
}

// mrStartSource runs a real kube-apiserver for a mirror test.
func mrStartSource(t *testing.T, opts kubeapiserver.Options) (*kubeapiserver.Cluster, kubernetes.Interface) {
	t.Helper()
	kas := kubeapiserver.Start(t, opts)
	cs, err := kubernetes.NewForConfig(kas.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := kas.EnsureNamespace(context.Background(), "mirror-a", "mirror-b"); err != nil {
		t.Fatal(err)
	}
	return kas, cs
}

// mrEventually waits up to a minute for cond.
func mrEventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
	}
	t.Fatalf("after a minute: %s (%s)", what, last)
}

// mrSame reports whether eventsd holds exactly the events kube-apiserver
// holds: same names, uids, counts, messages and other fields.
func mrSame(ctx context.Context, src, dst kubernetes.Interface) (bool, string) {
	a, err := src.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	b, err := dst.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	if len(a.Items) != len(b.Items) {
		return false, fmt.Sprintf("kube-apiserver has %d events, eventsd %d", len(a.Items), len(b.Items))
	}
	for i := range a.Items {
		x, y := a.Items[i].DeepCopy(), b.Items[i].DeepCopy()
		if y.Annotations[mirror.SourceResourceVersionAnnotation] != x.ResourceVersion {
			return false, fmt.Sprintf("%s/%s: mirrored from %s, the source is at %s", y.Namespace, y.Name, y.Annotations[mirror.SourceResourceVersionAnnotation], x.ResourceVersion)
		}
		delete(y.Annotations, mirror.SourceResourceVersionAnnotation)
		if len(y.Annotations) == 0 {
			y.Annotations = nil
		}
		x.ResourceVersion, y.ResourceVersion = "", ""
		x.ManagedFields, y.ManagedFields = nil, nil
		if !apiEqual(x, y) {
			return false, fmt.Sprintf("%s/%s differs:\nsource  %v\neventsd %v", x.Namespace, x.Name, x, y)
		}
	}
	return true, ""
}

func apiEqual(a, b runtime.Object) bool {
	return fmt.Sprintf("%v", a) == fmt.Sprintf("%v", b)
}

// TestMirrorCompleteness: a real kube-apiserver gets events from kubectl,
// client-go's two recorders and a writer that creates events and
// updates their counts one at a time; eventsd mirrors it through two
// SIGKILLs of its own and a restart of kube-apiserver. In the end eventsd
// holds every event kube-apiserver holds (same uid, fields and last
// count, none more), a watcher of eventsd saw every count each event had
// in kube-apiserver (each update a MODIFIED, no gaps), and kubectl shows
// the same events through both.
func TestMirrorCompleteness(t *testing.T) {
	ctx := context.Background()
	kas, src := mrStartSource(t, kubeapiserver.Options{EtcdCompactionInterval: -1})
	ev := eventsdtest.Start(t, eventsdtest.Options{Args: []string{"--source-kubeconfig", kas.Kubeconfig(), "--event-ttl", "24h"}})
	dst := ev.Clientset()
	// Both watchers start from a state both servers have: a first event,
	// mirrored (client-go's RetryWatcher needs a resourceVersion to
	// start from, and eventsd's store starts empty).
	if _, err := src.CoreV1().Events("mirror-a").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "first"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "mirror-a", Name: "web"}, Reason: "Started", Count: 1}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mrEventually(t, "the first event mirrored", func() (bool, string) { return mrSame(ctx, src, dst) })
	srcList, err := src.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dstList, err := dst.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srcSeen := mrFollow(t, ctx, src, srcList.ResourceVersion)
	dstSeen := mrFollow(t, ctx, dst, dstList.ResourceVersion)

	// client-go's recorders, as controllers use them, beside the writer.
	corev1Broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	corev1Broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: src.CoreV1().Events("")})
	defer corev1Broadcaster.Shutdown()
	rec := corev1Broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "mirror-test"})
	eventsBroadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: src.EventsV1()})
	if err := eventsBroadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer eventsBroadcaster.Shutdown()
	seriesRec := eventsBroadcaster.NewRecorder(scheme.Scheme, "mirror-test")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "mirror-a", Name: "web-0", UID: "uid-web-0"}}

	const events, updates = 30, 6
	var writerErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for round := 1; round <= updates; round++ {
			for i := range events {
				ns := []string{"mirror-a", "mirror-b"}[i%2]
				name := fmt.Sprintf("writer-%02d", i)
				if round == 1 {
					_, err := src.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name},
						InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("pod-%d", i)},
						Reason:         "BackOff", Message: "back-off 1", Type: corev1.EventTypeWarning, Count: 1,
						Source: corev1.EventSource{Component: "writer"}}, metav1.CreateOptions{})
					if err != nil && !apierrors.IsAlreadyExists(err) {
						writerErr = err
						return
					}
					continue
				}
				err := retryOnUnavailable(ctx, func() error {
					cur, err := src.CoreV1().Events(ns).Get(ctx, name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					if cur.Count >= int32(round) {
						return nil
					}
					cur.Count, cur.Message = int32(round), fmt.Sprintf("back-off %d", round)
					_, err = src.CoreV1().Events(ns).Update(ctx, cur, metav1.UpdateOptions{})
					return err
				})
				if err != nil {
					writerErr = err
					return
				}
				rec.Eventf(pod, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container (round %d)", round)
				seriesRec.Eventf(pod, nil, corev1.EventTypeWarning, "FailedMount", "Mount", "MountVolume.SetUp failed for volume %q", "config")
			}
			time.Sleep(300 * time.Millisecond)
		}
	}()

	time.Sleep(time.Second)
	ev.Kill()
	ev.Restart()
	time.Sleep(time.Second)
	// A crash of kube-apiserver (its graceful stop waits for the open
	// watches, longer than a test should).
	if err := kas.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := kas.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	ev.Kill()
	ev.Restart()
	wg.Wait()
	if writerErr != nil {
		t.Fatalf("the writer: %v", writerErr)
	}
	if r := eventsdtest.RunKubectl(ctx, t, kas.Kubeconfig(), strings.NewReader(`apiVersion: v1
kind: Event
metadata: {name: from-kubectl, namespace: mirror-b}
involvedObject: {apiVersion: v1, kind: Pod, name: web-1, namespace: mirror-b}
reason: Pulled
message: pulled by kubectl
type: Normal
`), "create", "-f", "-"); r.Err != nil {
		t.Fatalf("kubectl create: %v\n%s", r.Err, r.Stderr)
	}
	corev1Broadcaster.Shutdown()
	eventsBroadcaster.Shutdown()
	// Both recorders' events reached kube-apiserver.
	for _, reason := range []string{"BackOff", "FailedMount"} {
		l, err := src.CoreV1().Events("mirror-a").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason + ",involvedObject.name=web-0"})
		if err != nil || len(l.Items) == 0 {
			t.Fatalf("%s events of client-go's recorders in kube-apiserver: %v %v", reason, l, err)
		}
	}

	mrEventually(t, "eventsd holds what kube-apiserver holds", func() (bool, string) { return mrSame(ctx, src, dst) })
	for i := range events {
		k := fmt.Sprintf("%s/writer-%02d", []string{"mirror-a", "mirror-b"}[i%2], i)
		mrEventually(t, "every count of "+k+" reached eventsd's watcher", func() (bool, string) {
			want, got := srcSeen.get(k), dstSeen.get(k)
			return slices.Equal(want, got) && len(want) == updates, fmt.Sprintf("kube-apiserver's watch saw %v, eventsd's %v", want, got)
		})
	}
	// kubectl shows the same events through both.
	cols := "-o=custom-columns=NS:.metadata.namespace,NAME:.metadata.name,UID:.metadata.uid,COUNT:.count,REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message"
	a := eventsdtest.RunKubectl(ctx, t, kas.Kubeconfig(), nil, "get", "events", "-A", cols)
	b := eventsdtest.RunKubectl(ctx, t, ev.Kubeconfig(), nil, "get", "events", "-A", cols)
	if a.Err != nil || b.Err != nil || a.Stdout != b.Stdout || !strings.Contains(a.Stdout, "from-kubectl") {
		t.Fatalf("kubectl through kube-apiserver (%v):\n%s\nthrough eventsd (%v):\n%s", a.Err, a.Stdout, b.Err, b.Stdout)
	}
	// The mirror is read-only.
	_, err = dst.CoreV1().Events("mirror-a").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "local"}, InvolvedObject: corev1.ObjectReference{Namespace: "mirror-a"}}, metav1.CreateOptions{})
	if !apierrors.IsMethodNotSupported(err) || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("a write through the mirror: %v, want 405 saying it is read-only", err)
	}
}

// retryOnUnavailable retries f while kube-apiserver restarts (connection
// refused, 5xx) and on conflicts.
func retryOnUnavailable(ctx context.Context, f func() error) error {
	var err error
	for range 200 {
		if err = f(); err == nil {
			return nil
		}
		if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// TestMirrorAfterCompaction: eventsd is stopped; meanwhile events change
// and kube-apiserver's events etcd is compacted past the mirror's cursor.
// Restarted, the mirror's watch gets 410; it lists again and reconciles:
// nothing missing, and each event that changed is written once (one
// revision each), those that did not are not written at all.
func TestMirrorAfterCompaction(t *testing.T) {
	ctx := context.Background()
	kas, src := mrStartSource(t, kubeapiserver.Options{EtcdCompactionInterval: -1})
	for i := range 10 {
		if _, err := src.CoreV1().Events("mirror-a").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("e%d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "mirror-a", Name: "web"}, Reason: "Started", Count: 1}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ev := eventsdtest.Start(t, eventsdtest.Options{Args: []string{"--source-kubeconfig", kas.Kubeconfig()}})
	dst := ev.Clientset()
	mrEventually(t, "mirrored", func() (bool, string) { return mrSame(ctx, src, dst) })
	// What the mirror holds when it stops: after its restart it may have
	// reconciled before any list of the test's.
	before, err := dst.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev.Stop()

	for i := range 3 {
		cur, err := src.CoreV1().Events("mirror-a").Get(ctx, fmt.Sprintf("e%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Count = 9
		if _, err := src.CoreV1().Events("mirror-a").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.CoreV1().Events("mirror-b").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "late"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "mirror-b", Name: "web"}, Reason: "Started", Count: 1}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kas.CompactEvents(ctx); err != nil {
		t.Fatal(err)
	}
	ev.Restart()
	mrEventually(t, "reconciled after 410", func() (bool, string) { return mrSame(ctx, src, dst) })
	after, err := dst.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rvBefore := map[string]string{}
	for _, e := range before.Items {
		rvBefore[e.Name] = e.ResourceVersion
	}
	changed := 0
	for _, e := range after.Items {
		if rvBefore[e.Name] != e.ResourceVersion {
			changed++
		}
	}
	if changed != 4 {
		t.Fatalf("%d events written by the reconciliation, want the 4 that changed", changed)
	}
	m := cgMetrics(t, ev.URL, "")
	if m[`eventsd_mirror_relists_total{reason="expired"}`] != 1 {
		t.Fatalf("relists after 410: %v", m[`eventsd_mirror_relists_total{reason="expired"}`])
	}
}

// TestMirrorKeepsHistory: kube-apiserver with a 3 s --event-ttl deletes
// an event; eventsd keeps serving it (its own --event-ttl decides), and
// a second eventsd with --source-deletions=propagate deletes it too. Both
// run as a user with only the ClusterRole that deploy/kustomize/mirror
// gives the mirror.
func TestMirrorKeepsHistory(t *testing.T) {
	ctx := context.Background()
	kas, src := mrStartSource(t, kubeapiserver.Options{EventTTL: 3 * time.Second,
		Users: []kubeapiserver.User{{Name: "mirror-user"}}})
	// The ClusterRole the mirror base installs (deploy/kustomize/mirror),
	// alone: bound here to a user instead of the base's ServiceAccount.
	base := eventsdtest.RunKubectl(ctx, t, kas.Kubeconfig(), nil, "kustomize", filepath.Join("..", "..", "deploy", "kustomize", "mirror"))
	if base.Err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", base.Err, base.Stderr)
	}
	// The base's other ClusterRole, eventsd-viewer, is for people
	// reading the mirror, not for the mirror.
	var rbac []string
	for _, doc := range strings.Split(base.Stdout, "\n---\n") {
		if strings.Contains(doc, "\nkind: ClusterRole\n") && strings.Contains(doc, "\n  name: eventsd-mirror\n") {
			rbac = append(rbac, doc)
		}
	}
	if len(rbac) != 1 {
		t.Fatalf("want the mirror base's ClusterRole eventsd-mirror once; found %q", rbac)
	}
	if r := eventsdtest.RunKubectl(ctx, t, kas.Kubeconfig(), strings.NewReader(rbac[0]), "apply", "-f", "-"); r.Err != nil {
		t.Fatalf("applying the mirror's RBAC: %v\n%s", r.Err, r.Stderr)
	}
	if r := eventsdtest.RunKubectl(ctx, t, kas.Kubeconfig(), nil, "create", "clusterrolebinding", "mirror-user", "--clusterrole=eventsd-mirror", "--user=mirror-user"); r.Err != nil {
		t.Fatalf("binding the mirror's ClusterRole: %v\n%s", r.Err, r.Stderr)
	}
	keep := eventsdtest.Start(t, eventsdtest.Options{Args: []string{"--source-kubeconfig", kas.Kubeconfig(), "--source-context", "mirror-user"}})
	prop := eventsdtest.Start(t, eventsdtest.Options{Args: []string{"--source-kubeconfig", kas.Kubeconfig(), "--source-context", "mirror-user", "--source-deletions", "propagate"}})
	if _, err := src.CoreV1().Events("mirror-a").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "short-lived"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "mirror-a", Name: "web"}, Reason: "Started", Count: 1}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*eventsdtest.Process{keep, prop} {
		mrEventually(t, "mirrored", func() (bool, string) {
			_, err := p.Clientset().CoreV1().Events("mirror-a").Get(ctx, "short-lived", metav1.GetOptions{})
			return err == nil, fmt.Sprint(err)
		})
	}
	mrEventually(t, "expired in kube-apiserver", func() (bool, string) {
		_, err := src.CoreV1().Events("mirror-a").Get(ctx, "short-lived", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	mrEventually(t, "deleted by the propagating mirror", func() (bool, string) {
		_, err := prop.Clientset().CoreV1().Events("mirror-a").Get(ctx, "short-lived", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if _, err := keep.Clientset().CoreV1().Events("mirror-a").Get(ctx, "short-lived", metav1.GetOptions{}); err != nil {
		t.Fatalf("the keeping mirror lost the event the source expired: %v", err)
	}
}
