package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/internal/etcdproc"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/kubeapiserver"
	"github.com/kubevents/kubevents/mirror"
)

// flSource is one cluster of the fleet: a real kube-apiserver.
type flSource struct {
	name string
	kas  *kubeapiserver.Cluster
	cs   kubernetes.Interface
}

// flCreate creates event ns/name in the source, about a Pod, with msg.
func (s *flSource) flCreate(t *testing.T, ns, name, msg string) {
	t.Helper()
	err := retryOnUnavailable(context.Background(), func() error {
		_, err := s.cs.CoreV1().Events(ns).Create(context.Background(), &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web"}, Reason: "Started", Message: msg,
			Type: corev1.EventTypeNormal, Count: 1}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatalf("creating %s/%s in %s: %v", ns, name, s.name, err)
	}
}

// flTokens: an admin (system:masters) and a user the ABAC policy limits
// to namespace shop of cluster east.
const flTokens = "tok-admin,admin,1,\"system:masters\"\ntok-shop,shopper,2\n"

// flPolicy: the shopper may read events in east's namespace shop only.
const flPolicy = `{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "shopper", "cluster": "east", "namespace": "shop", "apiGroup": "*", "resource": "events", "readonly": true}}
`

// flClient is a clientset of eventsd at path (a cluster's or the
// fleet's) with token.
func flClient(t *testing.T, p *eventsdtest.Process, path, token string) kubernetes.Interface {
	t.Helper()
	cfg := p.RESTConfig()
	cfg.Host += path
	cfg.BearerToken = token
	return cgClientset(t, cfg)
}

// flKubeconfig writes a kubeconfig for eventsd's cluster name with token.
func flKubeconfig(t *testing.T, p *eventsdtest.Process, name, token string) string {
	t.Helper()
	return azWriteFile(t, name+".kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: eventsd
  cluster: {server: %q, insecure-skip-tls-verify: true}
contexts:
- name: eventsd
  context: {cluster: eventsd, user: u}
current-context: eventsd
users:
- name: u
  user: {token: %q}
`, p.URL+"/clusters/"+name, token))
}

// flKey names an event of the fleet: cluster/namespace/name.
func flKey(ev *corev1.Event) string {
	return ev.Annotations[eventapi.ClusterAnnotation] + "/" + ev.Namespace + "/" + ev.Name
}

// flFleetSame reports whether the fleet-wide list holds exactly the
// sources' events, each once, annotated with its cluster, with the
// source's uid, message and resourceVersion (as the mirror's annotation).
func flFleetSame(ctx context.Context, fleet kubernetes.Interface, sources []*flSource) (bool, string) {
	want := map[string]corev1.Event{}
	for _, s := range sources {
		l, err := s.cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, ev := range l.Items {
			want[s.name+"/"+ev.Namespace+"/"+ev.Name] = ev
		}
	}
	got, err := fleet.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	seen := map[string]bool{}
	for _, ev := range got.Items {
		k := flKey(&ev)
		w, ok := want[k]
		switch {
		case seen[k]:
			return false, k + " listed twice"
		case !ok:
			return false, k + " is not in its source"
		case w.UID != ev.UID || w.Message != ev.Message || ev.Annotations[mirror.SourceResourceVersionAnnotation] != w.ResourceVersion:
			return false, fmt.Sprintf("%s: uid %s message %q from %s; the source's: %s %q at %s", k, ev.UID, ev.Message,
				ev.Annotations[mirror.SourceResourceVersionAnnotation], w.UID, w.Message, w.ResourceVersion)
		}
		seen[k] = true
	}
	if len(seen) != len(want) {
		return false, fmt.Sprintf("the fleet lists %d events, the sources hold %d", len(seen), len(want))
	}
	return true, ""
}

// flWatch records the ADDED and MODIFIED a fleet-wide watch delivers, by
// key, in order.
type flWatch struct {
	mu     sync.Mutex
	events []string
	w      watch.Interface
	done   chan struct{}
}

func flFollow(t *testing.T, fleet kubernetes.Interface, rv string) *flWatch {
	t.Helper()
	w, err := fleet.CoreV1().Events("").Watch(context.Background(), metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	fw := &flWatch{w: w, done: make(chan struct{})}
	go func() {
		defer close(fw.done)
		for e := range w.ResultChan() {
			ev, ok := e.Object.(*corev1.Event)
			if !ok {
				continue
			}
			fw.mu.Lock()
			fw.events = append(fw.events, string(e.Type)+" "+flKey(ev))
			fw.mu.Unlock()
		}
	}()
	t.Cleanup(fw.stop)
	return fw
}

func (fw *flWatch) stop() { fw.w.Stop(); <-fw.done }

func (fw *flWatch) seen() []string {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return slices.Clone(fw.events)
}

// has reports whether the watch delivered each of keys as ADDED.
func (fw *flWatch) has(keys ...string) (bool, string) {
	got := fw.seen()
	for _, k := range keys {
		if !slices.Contains(got, "ADDED "+k) {
			return false, fmt.Sprintf("no ADDED %s among %v", k, got)
		}
	}
	return true, ""
}

// TestFleet: two real kube-apiservers (east, west) mirrored by one eventsd
// (the real binary, --sources-config), on pebble and on etcd: each
// cluster's kubectl output through /clusters/NAME is the source's own;
// the fleet-wide list and watch (/clusters/*) are exact, same-named events
// of the two clusters kept apart, and the watch resumes from its
// resourceVersion across an eventsd restart; while east's kube-apiserver
// is killed, west's events keep arriving, and east's catch up once it is
// back; an ABAC user limited to east's namespace shop sees that and
// nothing else, fleet-wide queries included.
func TestFleet(t *testing.T) {
	ctx := context.Background()
	var sources []*flSource
	for _, name := range []string{"east", "west"} {
		kas, cs := mrStartSource(t, kubeapiserver.Options{EtcdCompactionInterval: -1})
		if err := kas.EnsureNamespace(ctx, "shop", "ops"); err != nil {
			t.Fatal(err)
		}
		sources = append(sources, &flSource{name: name, kas: kas, cs: cs})
	}
	east, west := sources[0], sources[1]
	// Same-named events in both clusters, told apart by their messages.
	east.flCreate(t, "shop", "same", "east's")
	west.flCreate(t, "shop", "same", "west's")
	east.flCreate(t, "ops", "east-ops", "east's ops")
	cfg := azWriteFile(t, "sources.yaml", fmt.Sprintf(`apiVersion: eventsd.kubevents.io/v1alpha1
kind: SourcesConfiguration
sources:
- name: east
  kubeconfig: %s
  qps: 50
  burst: 100
- name: west
  kubeconfig: %s
`, east.kas.Kubeconfig(), west.kas.Kubeconfig()))
	cert, key, _ := cgServingCert(t, "localhost")
	args := []string{"--sources-config", cfg, "--tls-cert-file", cert, "--tls-private-key-file", key,
		"--token-auth-file", azWriteFile(t, "tokens.csv", flTokens),
		"--authorization-mode", "ABAC", "--authorization-policy-file", azWriteFile(t, "policy.jsonl", flPolicy)}

	t.Run("pebble", func(t *testing.T) { flRun(t, sources, args) })
	t.Run("etcd", func(t *testing.T) {
		store := etcdproc.Start(t, 1)
		flRun(t, sources, append(args, "--storage-backend=etcd", "--etcd-servers="+strings.Join(store.Endpoints(), ","), "--etcd-prefix=/fleet"))
	})
}

// flRun is TestFleet on one backend (args select it).
func flRun(t *testing.T, sources []*flSource, args []string) {
	ctx := context.Background()
	east, west := sources[0], sources[1]
	// Names of this backend's events, apart from the other backend's run.
	n := func(s string) string { return strings.ToLower(t.Name()[strings.LastIndex(t.Name(), "/")+1:]) + "-" + s }
	east.flCreate(t, "shop", n("before"), "created before eventsd started")

	ev := eventsdtest.Start(t, eventsdtest.Options{Args: args})
	fleet := flClient(t, ev, "/clusters/*", "tok-admin")
	perCluster := map[string]kubernetes.Interface{}
	for _, s := range sources {
		perCluster[s.name] = flClient(t, ev, "/clusters/"+s.name, "tok-admin")
		mrEventually(t, s.name+" mirrored at /clusters/"+s.name, func() (bool, string) { return mrSame(ctx, s.cs, perCluster[s.name]) })
	}
	mrEventually(t, "the fleet-wide list exact", func() (bool, string) { return flFleetSame(ctx, fleet, sources) })

	// Same-named events kept apart: each cluster's own, and both
	// fleet-wide, annotated.
	for _, s := range sources {
		got, err := perCluster[s.name].CoreV1().Events("shop").Get(ctx, "same", metav1.GetOptions{})
		if err != nil || got.Message != s.name+"'s" {
			t.Errorf("/clusters/%s/ shop/same: %v %v", s.name, got, err)
		}
		l, err := fleet.CoreV1().Events("shop").List(ctx, metav1.ListOptions{FieldSelector: "cluster=" + s.name + ",metadata.name=same"})
		if err != nil || len(l.Items) != 1 || l.Items[0].Message != s.name+"'s" || l.Items[0].Annotations[eventapi.ClusterAnnotation] != s.name {
			t.Errorf("fleet-wide shop/same of cluster=%s: %v %v", s.name, l, err)
		}
	}

	// kubectl through /clusters/NAME shows what kubectl shows through the
	// source.
	cols := "-o=custom-columns=NS:.metadata.namespace,NAME:.metadata.name,UID:.metadata.uid,COUNT:.count,REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message"
	for _, s := range sources {
		a := eventsdtest.RunKubectl(ctx, t, s.kas.Kubeconfig(), nil, "get", "events", "-A", cols)
		b := eventsdtest.RunKubectl(ctx, t, flKubeconfig(t, ev, s.name, "tok-admin"), nil, "get", "events", "-A", cols)
		if a.Err != nil || b.Err != nil || a.Stdout != b.Stdout || !strings.Contains(a.Stdout, "same") {
			t.Errorf("kubectl get events -A of %s through kube-apiserver (%v):\n%s\nthrough eventsd (%v):\n%s%s", s.name, a.Err, a.Stdout, b.Err, b.Stdout, b.Stderr)
		}
	}

	// The fleet-wide watch, from the fleet-wide list.
	start, err := fleet.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fw := flFollow(t, fleet, start.ResourceVersion)
	east.flCreate(t, "shop", n("live"), "live in east")
	west.flCreate(t, "ops", n("live"), "live in west")
	mrEventually(t, "both live events watched", func() (bool, string) {
		return fw.has("east/shop/"+n("live"), "west/ops/"+n("live"))
	})

	// One source down: the others keep flowing.
	if err := east.kas.Kill(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		west.flCreate(t, "shop", n(fmt.Sprintf("while-east-down-%d", i)), "west goes on")
	}
	mrEventually(t, "west's events watched while east is down", func() (bool, string) {
		return fw.has("west/shop/"+n("while-east-down-0"), "west/shop/"+n("while-east-down-1"), "west/shop/"+n("while-east-down-2"))
	})
	if east.kas.Running() {
		t.Fatal("east's kube-apiserver came back by itself")
	}
	if err := east.kas.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	east.flCreate(t, "shop", n("after-restart"), "east is back")
	mrEventually(t, "east caught up", func() (bool, string) { return fw.has("east/shop/" + n("after-restart")) })
	mrEventually(t, "east exact again", func() (bool, string) { return mrSame(ctx, east.cs, perCluster["east"]) })
	mrEventually(t, "the fleet-wide list exact again", func() (bool, string) { return flFleetSame(ctx, fleet, sources) })
	// The watch saw each event once, as ADDED: no change was applied
	// twice across the source's restart.
	counts := map[string]int{}
	for _, e := range fw.seen() {
		counts[e]++
	}
	for e, c := range counts {
		if c != 1 || !strings.HasPrefix(e, "ADDED ") {
			t.Errorf("the fleet-wide watch delivered %q %d times", e, c)
		}
	}

	// Resumable: a watch from the fleet's resourceVersion before an
	// eventsd restart gets exactly what changed since.
	fw.stop()
	before, err := fleet.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev.Stop()
	east.flCreate(t, "ops", n("while-eventsd-down"), "mirrored after the restart")
	west.flCreate(t, "shop", n("while-eventsd-down"), "mirrored after the restart")
	ev.Restart()
	resumed := flFollow(t, fleet, before.ResourceVersion)
	want := []string{"ADDED east/ops/" + n("while-eventsd-down"), "ADDED west/shop/" + n("while-eventsd-down")}
	mrEventually(t, "the resumed watch got what changed while eventsd was down", func() (bool, string) {
		return resumed.has("east/ops/"+n("while-eventsd-down"), "west/shop/"+n("while-eventsd-down"))
	})
	mrEventually(t, "the fleet-wide list exact after the restart", func() (bool, string) { return flFleetSame(ctx, fleet, sources) })
	if got := resumed.seen(); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("the resumed watch delivered %v, want only %v", got, want)
	}

	// Who sees what: the shopper reads east's namespace shop, nothing else.
	shopEast := flClient(t, ev, "/clusters/east", "tok-shop")
	l, err := shopEast.CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
	srcShop, serr := east.cs.CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
	if err != nil || serr != nil || !slices.Equal(flNames(l.Items), flNames(srcShop.Items)) {
		t.Errorf("the shopper's east/shop: %v (%v); east's: %v (%v)", l, err, srcShop, serr)
	}
	_, err = flClient(t, ev, "/clusters/west", "tok-shop").CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
	azExpectForbidden(t, err, "the shopper listing west's shop", "")
	_, err = shopEast.CoreV1().Events("ops").List(ctx, metav1.ListOptions{})
	azExpectForbidden(t, err, "the shopper listing east's ops", "")
	_, err = shopEast.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	azExpectForbidden(t, err, "the shopper listing east's every namespace", "")
	_, err = flClient(t, ev, "", "tok-shop").CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
	azExpectForbidden(t, err, "the shopper at the root", "")
	_, err = flClient(t, ev, "/clusters/*", "tok-shop").CoreV1().Events("ops").List(ctx, metav1.ListOptions{})
	azExpectForbidden(t, err, "the shopper listing ops fleet-wide", "")
	fl, err := flClient(t, ev, "/clusters/*", "tok-shop").CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("the shopper listing shop fleet-wide: %v", err)
	}
	clusters := map[string]bool{}
	for _, e := range fl.Items {
		clusters[e.Annotations[eventapi.ClusterAnnotation]] = true
	}
	if !slices.Equal(flNames(fl.Items), flNames(srcShop.Items)) || !maps.Equal(clusters, map[string]bool{"east": true}) {
		t.Errorf("the shopper's fleet-wide shop: %v of clusters %v; want east's %v", flNames(fl.Items), clusters, flNames(srcShop.Items))
	}
	// A watch too: a west event in shop does not reach the shopper.
	sw, err := flClient(t, ev, "/clusters/*", "tok-shop").CoreV1().Events("shop").Watch(ctx, metav1.ListOptions{ResourceVersion: fl.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Stop()
	west.flCreate(t, "shop", n("not-for-shopper"), "west")
	east.flCreate(t, "shop", n("for-shopper"), "east")
	select {
	case e := <-sw.ResultChan():
		if got, ok := e.Object.(*corev1.Event); !ok || flKey(got) != "east/shop/"+n("for-shopper") {
			t.Errorf("the shopper's fleet-wide watch delivered %s %v", e.Type, e.Object)
		}
	case <-time.After(time.Minute):
		t.Error("the shopper's fleet-wide watch delivered nothing")
	}
}

// flNames are events' names, sorted.
func flNames(evs []corev1.Event) []string {
	var names []string
	for _, e := range evs {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	return names
}
