package lineage

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/internal/kubeapiserver"
	"github.com/kubevents/kubevents/internal/metricstest"
	"github.com/kubevents/kubevents/internal/syncbuf"
)

// leakOptions ignore what client-go keeps for the life of the process
// (its transports' idle connections) and what ran before the test.
func leakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	}
}

// eventually polls cond every 50ms for up to d, failing the test with
// what when it never holds.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// running is a Follower running until stop.
type running struct {
	*Follower
	cancel context.CancelFunc
	done   chan error
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30s after its context ended")
	}
}

func startFollower(t *testing.T, opts FollowerOptions) *running {
	t.Helper()
	f, err := NewFollower(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Follower: f, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- f.Run(ctx) }()
	return r
}

// countingMapper counts the mappings asked of it by group and kind, and
// its resets.
type countingMapper struct {
	meta.RESTMapper
	mu      sync.Mutex
	calls   map[schema.GroupKind]int
	resets  atomic.Int32
	kindFor atomic.Int32
}

func (m *countingMapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	m.kindFor.Add(1)
	return m.RESTMapper.KindFor(r)
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.mu.Lock()
	if m.calls == nil {
		m.calls = map[schema.GroupKind]int{}
	}
	m.calls[gk]++
	m.mu.Unlock()
	return m.RESTMapper.RESTMapping(gk, versions...)
}

func (m *countingMapper) count(gk schema.GroupKind) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[gk]
}

func (m *countingMapper) Reset() {
	m.resets.Add(1)
	if r, ok := m.RESTMapper.(meta.ResettableRESTMapper); ok {
		r.Reset()
	}
}

func ownedBy(kind, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptrTo(true)}}
}

func ptrTo[T any](v T) *T { return &v }

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}, AutomountServiceAccountToken: ptrTo(false)}
}

// TestFollower follows a real kube-apiserver's objects into a Graph:
// ownership, kinds and apiVersions from the metadata; deletions; a
// restart reconciling what went while nothing watched; refusals named
// in Learning until RBAC allows; kinds events name followed on demand.
func TestFollower(t *testing.T) {
	c := kubeapiserver.Start(t, kubeapiserver.Options{Users: []kubeapiserver.User{{Name: "limited"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	md, err := metadata.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("Ownership", func(t *testing.T) {
		defer goleak.VerifyNone(t, leakOptions()...)
		ns := "family"
		if err := c.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		// No controller makes the namespace's ServiceAccount here; Pods
		// need it to be admitted.
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{"app": "web"}
		dep, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec()},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web-5d8f", OwnerReferences: ownedBy("Deployment", dep.Name, dep.UID)},
			Spec: appsv1.ReplicaSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec()},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var pods []*corev1.Pod
		for _, name := range []string{"web-5d8f-a", "web-5d8f-b"} {
			p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, OwnerReferences: ownedBy("ReplicaSet", rs.Name, rs.UID)},
				Spec:       podSpec(),
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pods = append(pods, p)
		}
		node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}

		mapper, err := NewMapper(c.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		g := New(Options{})
		if g.Learning() == "" {
			t.Fatal("a new Graph says ownership is learned")
		}
		reg := prometheus.NewRegistry()
		f := startFollower(t, FollowerOptions{Metadata: md, Mapper: mapper, Graph: g, Registerer: reg})
		eventually(t, time.Minute, "the default kinds synced", f.HasSynced)
		if r := g.Learning(); r != "" {
			t.Fatalf("Learning() after sync: %q", r)
		}
		if v := metricstest.Sum(t, reg, "eventsd_lineage_learning"); v != 1 {
			t.Errorf("eventsd_lineage_learning %v, want 1", v)
		}

		check := func(uid types.UID, apiVersion, kind, namespace, name string, owners ...types.UID) {
			t.Helper()
			o, ok := g.Get(ID(uid))
			if !ok {
				t.Fatalf("%s %s/%s (%s) not in the graph", kind, namespace, name, uid)
			}
			var want []ID
			for _, u := range owners {
				want = append(want, ID(u))
			}
			if o.APIVersion != apiVersion || o.Kind != kind || o.Namespace != namespace || o.Name != name || len(o.Owners) != len(want) || !slices.Equal(o.Owners, want) || o.Deleted {
				t.Errorf("%s/%s: %+v, want %s %s owned by %v, not deleted", namespace, name, o, apiVersion, kind, want)
			}
		}
		check(dep.UID, "apps/v1", "Deployment", ns, "web")
		check(rs.UID, "apps/v1", "ReplicaSet", ns, rs.Name, dep.UID)
		for _, p := range pods {
			check(p.UID, "v1", "Pod", ns, p.Name, rs.UID)
		}
		check(node.UID, "v1", "Node", "", "node-a")
		if o, _ := g.Get(ID(pods[0].UID)); !o.FirstSeen.Equal(pods[0].CreationTimestamp.Time) {
			t.Errorf("FirstSeen %v, want the creationTimestamp %v", o.FirstSeen, pods[0].CreationTimestamp)
		}
		if got := g.Children(ID(dep.UID)); !slices.Equal(got, []ID{ID(rs.UID)}) {
			t.Errorf("children of the Deployment: %v, want the ReplicaSet", got)
		}
		if got := g.Children(ID(rs.UID)); len(got) != 2 {
			t.Errorf("children of the ReplicaSet: %v, want its 2 Pods", got)
		}

		// Changes arrive through the watch.
		p3, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-5d8f-c", OwnerReferences: ownedBy("ReplicaSet", rs.Name, rs.UID)},
			Spec:       podSpec(),
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "a Pod created after the sync is learned", func() bool { _, ok := g.Get(ID(p3.UID)); return ok })
		check(p3.UID, "v1", "Pod", ns, p3.Name, rs.UID)
		if err := cs.CoreV1().Pods(ns).Delete(ctx, pods[0].Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "a deleted Pod marked deleted", func() bool { o, _ := g.Get(ID(pods[0].UID)); return o.Deleted })
		if v := metricstest.Sum(t, reg, "eventsd_lineage_source_relists_total", "resource", "pods"); v != 1 {
			t.Errorf("relists of pods %v, want 1", v)
		}
		if v := metricstest.Sum(t, reg, "eventsd_lineage_source_objects_total", "resource", "pods"); v < 3 {
			t.Errorf("pods learned %v, want at least 3", v)
		}
		f.stop(t)
		if r := g.Learning(); r == "" {
			t.Error("Learning() is empty after the Follower stopped")
		}

		// While nothing watches, a Pod and the ReplicaSet go; a new
		// Follower on the same Graph finds them gone in its first lists.
		for _, del := range []func() error{
			func() error {
				return cs.CoreV1().Pods(ns).Delete(ctx, pods[1].Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))})
			},
			func() error { return cs.AppsV1().ReplicaSets(ns).Delete(ctx, rs.Name, metav1.DeleteOptions{}) },
		} {
			if err := del(); err != nil {
				t.Fatal(err)
			}
		}
		if o, _ := g.Get(ID(pods[1].UID)); o.Deleted {
			t.Fatal("a Pod marked deleted while nothing watched")
		}
		f2 := startFollower(t, FollowerOptions{Metadata: md, Mapper: mapper, Graph: g})
		eventually(t, time.Minute, "the restarted Follower synced", f2.HasSynced)
		for _, uid := range []types.UID{pods[1].UID, rs.UID} {
			if o, _ := g.Get(ID(uid)); !o.Deleted {
				t.Errorf("%s deleted while nothing watched: %+v, want deleted by the relist", o.String(), o)
			}
		}
		for _, uid := range []types.UID{dep.UID, p3.UID, node.UID} {
			if o, _ := g.Get(ID(uid)); o.Deleted {
				t.Errorf("%s still exists but is marked deleted", o.String())
			}
		}
		f2.stop(t)
		if err := f2.Run(context.Background()); err == nil {
			t.Error("a second Run returned no error")
		}
	})

	t.Run("Refused", func(t *testing.T) {
		defer goleak.VerifyNone(t, leakOptions()...)
		// The limited user may read every default kind but Pods.
		rule := func(group string, resources ...string) rbacv1.PolicyRule {
			return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: []string{"get", "list", "watch"}}
		}
		role, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "lineage-limited"},
			Rules: []rbacv1.PolicyRule{
				rule("", "nodes"),
				rule("apps", "replicasets", "deployments", "statefulsets", "daemonsets"),
				rule("batch", "jobs", "cronjobs"),
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "lineage-limited"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "limited"}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		lmd, err := metadata.NewForConfig(c.UserConfig("limited"))
		if err != nil {
			t.Fatal(err)
		}
		mapper, err := NewMapper(c.UserConfig("limited"))
		if err != nil {
			t.Fatal(err)
		}
		g := New(Options{})
		reg := prometheus.NewRegistry()
		var logs syncbuf.Buffer
		clk := clocktesting.NewFakeClock(time.Now())
		f := startFollower(t, FollowerOptions{Metadata: lmd, Mapper: mapper, Graph: g, Registerer: reg, Clock: clk,
			Log: slog.New(slog.NewTextHandler(&logs, nil))})
		defer f.stop(t)
		want := `the source refuses to list pods (403 Forbidden): grant get, list and watch on "pods" of API group ""`
		eventually(t, time.Minute, "Learning() names the refused list of pods", func() bool { return strings.Contains(g.Learning(), want) })
		if !strings.HasPrefix(g.Learning(), "ownership is not learned: ") {
			t.Errorf("Learning() = %q", g.Learning())
		}
		// The reflector retries, with backoff; each refusal is counted
		// and the first alone is logged (the fake clock does not move).
		eventually(t, time.Minute, "refusals retried", func() bool {
			return metricstest.Sum(t, reg, "eventsd_lineage_source_errors_total", "resource", "pods", "request", "list", "code", "403") >= 2
		})
		if f.HasSynced() {
			t.Error("HasSynced with pods refused")
		}
		if n := strings.Count(logs.String(), "resource=pods"); n != 1 {
			t.Errorf("%d log lines about pods, want 1:\n%s", n, logs.String())
		}
		if v := metricstest.Sum(t, reg, "eventsd_lineage_source_relists_total", "resource", "nodes"); v != 1 {
			t.Errorf("nodes listed %v times, want 1 (they are allowed)", v)
		}
		if v := metricstest.Sum(t, reg, "eventsd_lineage_learning"); v != 0 {
			t.Errorf("eventsd_lineage_learning %v while pods are refused", v)
		}

		// RBAC granted later: the retries get through.
		role.Rules = append(role.Rules, rule("", "pods"))
		if _, err := cs.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, "ownership learned once pods may be listed", func() bool { return g.Learning() == "" && f.HasSynced() })
	})

	t.Run("NoteKind", func(t *testing.T) {
		defer goleak.VerifyNone(t, leakOptions()...)
		ns := "notekind"
		if err := c.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		inner, err := NewMapper(c.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		mapper := &countingMapper{RESTMapper: inner}
		clk := clocktesting.NewFakeClock(time.Now())
		g := New(Options{})
		f := startFollower(t, FollowerOptions{Metadata: md, Mapper: mapper, Graph: g, Clock: clk, Kinds: []string{"pods"}})
		defer f.stop(t)
		eventually(t, time.Minute, "pods synced", f.HasSynced)

		configMap := schema.GroupKind{Kind: "ConfigMap"}
		f.NoteKind("v1", "ConfigMap")
		eventually(t, 30*time.Second, "the ConfigMap learned once its kind was noted", func() bool { _, ok := g.Get(ID(cm.UID)); return ok })
		if o, _ := g.Get(ID(cm.UID)); o.Kind != "ConfigMap" || o.APIVersion != "v1" || o.Namespace != ns || o.Name != "settings" {
			t.Errorf("the ConfigMap: %+v", o)
		}
		if r := g.Learning(); r != "" {
			t.Errorf("Learning() %q", r)
		}
		for range 1000 {
			f.NoteKind("v1", "ConfigMap")
			f.NoteKind("v1", "Pod")
		}

		// An unknown kind is asked about once, then not again for a
		// minute of the Follower's clock.
		widget := schema.GroupKind{Group: "example.com", Kind: "Widget"}
		// Kinds are mapped one at a time in the order noted: once a
		// kind noted later is mapped, the earlier ones are done.
		after := func(kind string) {
			t.Helper()
			f.NoteKind("v1", kind)
			eventually(t, 30*time.Second, kind+" mapped", func() bool { return mapper.count(schema.GroupKind{Kind: kind}) > 0 })
		}
		f.NoteKind("example.com/v1", "Widget")
		after("ServiceAccount")
		calls := mapper.count(widget)
		if calls == 0 {
			t.Fatal("Widget not mapped")
		}
		for range 1000 {
			f.NoteKind("example.com/v1", "Widget")
		}
		after("LimitRange")
		if n := mapper.count(widget); n != calls {
			t.Errorf("Widget mapped %d times after 1000 notes within the minute, want %d", n, calls)
		}
		if n := mapper.count(configMap); n != 1 {
			t.Errorf("ConfigMap mapped %d times, want 1", n)
		}
		if n := mapper.count(schema.GroupKind{Kind: "Pod"}); n != 1 {
			t.Errorf("Pod mapped %d times, want 1 (a configured kind noted)", n)
		}
		clk.Step(DefaultRetryInterval)
		f.NoteKind("example.com/v1", "Widget")
		eventually(t, 30*time.Second, "the unknown kind mapped again after a minute", func() bool { return mapper.count(widget) > calls })
		if n := mapper.resets.Load(); n > 2 {
			t.Errorf("discovery reset %d times for an unknown kind noted twice, a minute apart", n)
		}
		// Nonsense is ignored.
		f.NoteKind("", "")
		f.NoteKind("a/b/c", "X")
		f.NoteKind("v1", "")
	})
}

// TestFollowerOptions: what NewFollower refuses.
func TestFollowerOptions(t *testing.T) {
	md := metadatafake.NewSimpleMetadataClient(runtime.NewScheme())
	mapper := meta.NewDefaultRESTMapper(nil)
	g := New(Options{})
	for _, tc := range []struct {
		opts FollowerOptions
		want string
	}{
		{FollowerOptions{Mapper: mapper, Graph: g}, "Metadata is required"},
		{FollowerOptions{Metadata: md, Graph: g}, "Mapper is required"},
		{FollowerOptions{Metadata: md, Mapper: mapper}, "Graph is required"},
		{FollowerOptions{Metadata: md, Mapper: mapper, Graph: g, Kinds: []string{"Pods"}}, `kind "Pods": want a resource in lower case`},
		{FollowerOptions{Metadata: md, Mapper: mapper, Graph: g, Kinds: []string{""}}, `kind "": want a resource`},
		{FollowerOptions{Metadata: md, Mapper: mapper, Graph: g, Kinds: []string{"apps/v1/deployments"}}, `kind "apps/v1/deployments"`},
		{FollowerOptions{Metadata: md, Mapper: mapper, Graph: g, Kinds: []string{"pods", "nodes", "pods"}}, `kind "pods" is listed twice`},
	} {
		_, err := NewFollower(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.opts.Kinds, err, tc.want)
		}
	}
	reg := prometheus.NewRegistry()
	if _, err := NewFollower(FollowerOptions{Metadata: md, Mapper: mapper, Graph: g, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewFollower(FollowerOptions{Metadata: md, Mapper: mapper, Graph: g, Registerer: reg}); err == nil || !strings.Contains(err.Error(), "metrics") {
		t.Errorf("a second Follower on the same Registerer: %v, want the registration's error", err)
	}
}

// TestFollowerStore: the Reflector's store writes through to the Graph,
// including a deletion whose final state is unknown.
func TestFollowerStore(t *testing.T) {
	g := New(Options{})
	var logs syncbuf.Buffer
	clk := clocktesting.NewFakeClock(time.Now())
	f, err := NewFollower(FollowerOptions{Metadata: metadatafake.NewSimpleMetadataClient(runtime.NewScheme()), Mapper: meta.NewDefaultRESTMapper(nil), Graph: g, Kinds: []string{},
		Clock: clk, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s := &graphStore{f: f, s: f.newSource(schema.GroupResource{Resource: "pods"}, false), apiVersion: "v1", kind: "Pod"}
	pod := func(uid, name string, owners ...string) *metav1.PartialObjectMetadata {
		o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "ns"}}
		for _, ow := range owners {
			o.OwnerReferences = append(o.OwnerReferences, metav1.OwnerReference{UID: types.UID(ow)})
		}
		return o
	}
	if err := s.Add(pod("p1", "a", "rs1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(pod("p1", "a")); err != nil {
		t.Fatal(err)
	}
	if o, _ := g.Get("p1"); len(o.Owners) != 0 {
		t.Errorf("owners after the ownerReference went: %v, want none", o.Owners)
	}
	if err := s.Delete(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: pod("p1", "a")}); err != nil {
		t.Fatal(err)
	}
	if o, _ := g.Get("p1"); !o.Deleted {
		t.Errorf("after DeletedFinalStateUnknown: %+v, want deleted", o)
	}
	// What cannot be read is skipped and logged, rate-limited; the
	// rest goes on (an error would make the Reflector list again).
	if err := s.Add(pod("", "b")); err != nil || !strings.Contains(logs.String(), "has no uid") {
		t.Errorf("an object without uid: %v, logged %q", err, logs.String())
	}
	clk.Step(followerLogInterval)
	if err := s.Replace([]any{pod("p2", "b"), "not an object"}, "1"); err != nil || !strings.Contains(logs.String(), "does not implement") {
		t.Errorf("Replace with something that is not an object: %v, logged %q", err, logs.String())
	}
	if _, ok := g.Get("p2"); !ok {
		t.Error("Replace dropped the good objects along with the bad one")
	}
	if err := s.Delete(pod("", "c")); err != nil {
		t.Errorf("Delete of an object without uid: %v", err)
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 2 {
		t.Errorf("%d lines logged, want 2 (the third within the interval):\n%s", n, logs.String())
	}
}

// TestFollowerWatchErrors: the ERROR events of a watch (a 410 Gone after a
// compaction) are passed on and counted by code, and a watch stopped
// while an event waits for its reader ends without leaking.
func TestFollowerWatchErrors(t *testing.T) {
	defer goleak.VerifyNone(t)
	in := watch.NewFake()
	var codes []int
	w := newErrorCountingWatch(in, func(code int) { codes = append(codes, code) })
	go in.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired})
	e := <-w.ResultChan()
	if e.Type != watch.Error || e.Object.(*metav1.Status).Code != 410 {
		t.Errorf("passed on %+v", e)
	}
	go in.Add(&metav1.PartialObjectMetadata{})
	e = <-w.ResultChan()
	if e.Type != watch.Added {
		t.Errorf("passed on %+v", e)
	}
	if !slices.Equal(codes, []int{410}) {
		t.Errorf("counted %v, want [410]", codes)
	}
	// An event the reader never takes.
	sent := make(chan struct{})
	go func() { in.Modify(&metav1.PartialObjectMetadata{}); close(sent) }()
	<-sent
	w.Stop()
	for range w.ResultChan() {
	}
}

// TestFollowerUnmapped: a configured kind the source's discovery does not
// know is the reason ownership is not learned, and mapping it is retried
// with backoff on the Follower's clock.
func TestFollowerUnmapped(t *testing.T) {
	defer goleak.VerifyNone(t)
	mapper := &countingMapper{RESTMapper: meta.NewDefaultRESTMapper(nil)}
	clk := clocktesting.NewFakeClock(time.Now())
	g := New(Options{})
	f := startFollower(t, FollowerOptions{Metadata: metadatafake.NewSimpleMetadataClient(runtime.NewScheme()), Mapper: mapper, Graph: g, Clock: clk, Kinds: []string{"widgets.example.com"}})
	want := "ownership is not learned: the source's discovery does not map widgets.example.com: "
	eventually(t, 10*time.Second, "Learning() names the unmapped kind", func() bool { return strings.HasPrefix(g.Learning(), want) })
	tries := func() int { return int(mapper.kindFor.Load()) }
	eventually(t, 10*time.Second, "the retry waits on the clock", clk.HasWaiters)
	// The first attempt asked discovery again (a Reset) when the kind
	// was not found; the retries within RetryInterval do not.
	if n := mapper.resets.Load(); n != 1 {
		t.Errorf("%d resets, want 1", n)
	}
	for _, d := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		n := tries()
		clk.Step(d - time.Millisecond)
		if !clk.HasWaiters() || tries() != n {
			t.Fatalf("retried before %v", d)
		}
		clk.Step(time.Millisecond)
		eventually(t, 10*time.Second, "retried after the backoff", func() bool { return tries() == n+1 })
		eventually(t, 10*time.Second, "the next retry waits on the clock", clk.HasWaiters)
	}
	if n := mapper.resets.Load(); n != 1 {
		t.Errorf("%d resets within RetryInterval, want 1", n)
	}
	if f.HasSynced() {
		t.Error("HasSynced with a kind never listed")
	}
	f.stop(t)
}

// BenchmarkFollowerNoteKind: the cost of noting a kind already known, as
// every stored event does for its regarding and related objects.
func BenchmarkFollowerNoteKind(b *testing.B) {
	f, err := NewFollower(FollowerOptions{Metadata: metadatafake.NewSimpleMetadataClient(runtime.NewScheme()), Mapper: meta.NewDefaultRESTMapper(nil), Graph: New(Options{})})
	if err != nil {
		b.Fatal(err)
	}
	f.NoteKind("apps/v1", "Deployment") // queued: known from then on
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			f.NoteKind("apps/v1", "Deployment")
		}
	})
}
