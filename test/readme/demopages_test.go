package readme

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubevents/kubevents/internal/buildcache"
	"github.com/kubevents/kubevents/internal/doctest"
	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// The pages TestDemoPagesCommands runs.
const (
	restartDoc        = "docs/why-did-my-pod-restart.md"
	gettingStartedDoc = "docs/getting-started.md"
)

// The ```sh blocks of why-did-my-pod-restart.md, by a text only each has.
const (
	wrDemo       = "go run ./cmd/eventsd --demo"
	wrKubeconfig = "kubectl config --kubeconfig eventsd.kubeconfig set-cluster eventsd"
	wrGet        = "evctl get -A --type Warning --since 1h"
	wrTimeline   = "evctl timeline pod/web-7f6d9c8b5-xk2lp --watch"
	wrWatch      = "evctl watch -A --type Warning"
	wrKubectl    = "kubectl get events -A -w"
	wrReporting  = "reportingController=kubelet,reportingInstance=node-1"
	wrCreate     = "metadata: {name: web-7f6d9c8b5-xk2lp.manual, namespace: shop}"
	wrApply      = "kubectl apply --server-side -f -"
)

// The ```sh blocks of getting-started.md, by a text only each has.
const (
	gsRun   = "go run ./cmd/eventsd --demo"
	gsBuild = "go build -v -o bin/ ./cmd/eventsd ./cmd/evctl"
)

// demoReady is what eventsd --demo logs once its story is written.
const demoReady = "demo: wrote the story's events"

// TestDemoPagesCommands runs the ```sh blocks of
// docs/why-did-my-pod-restart.md and docs/getting-started.md as a reader
// would, against the eventsd --demo the pages start, and checks what the
// prose says each block shows. (Their ```console blocks are
// TestTranscripts'.)
//
// What the test changes, and why, is said at each substitution: `go run
// ./cmd/eventsd` runs the eventsd built once (go run would build it
// again); eventsd listens on a free port (other tests may hold 8080) and
// the later blocks' 8080 is that port; each block runs in a shell of its
// own, so the KUBECONFIG the page exports is passed on to the later
// blocks; blocks that watch (--watch, evctl watch, kubectl -w) run in a
// terminal of their own until they print an event the test writes, then
// are stopped as Ctrl-C would; getting-started's go build writes into a
// directory of the test's instead of the repository's bin/.
func TestDemoPagesCommands(t *testing.T) {
	t.Parallel()
	// eventsd on a free port: its address is read from its log.
	const eventsdCmd = "eventsd --demo --listen 127.0.0.1:0"

	t.Run("why-did-my-pod-restart", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		defer func() { t.Logf("%v", time.Since(start).Round(time.Millisecond)) }()
		blocks := pageBlocks(t, restartDoc, []string{wrDemo, wrKubeconfig, wrGet, wrTimeline, wrWatch, wrKubectl, wrReporting, wrCreate, wrApply}, nil)
		bin := commandsBin(t, "evctl")
		dir := t.TempDir()
		r := newReader(t, dir, bin, t.TempDir())

		demo, _ := r.terminal(replace(t, blocks[wrDemo], "go run ./cmd/eventsd --demo", eventsdCmd), demoReady)
		addr := servingAddr(t, demo)
		cs := eventsdClient(addr)

		// The kubeconfig for the demo: its 8080 is the demo's port.
		if _, err := r.run(replace(t, blocks[wrKubeconfig], "127.0.0.1:8080", addr)); err != nil {
			t.Fatal(err)
		}
		// The block's export, for the reader's later commands (each block
		// here is a shell of its own).
		r.env = append(r.env, "KUBECONFIG="+filepath.Join(dir, "eventsd.kubeconfig"))

		out, err := r.run(blocks[wrGet])
		if err != nil {
			t.Fatal(err)
		}
		// Two lists, each with its header: the demo's Warnings across
		// namespaces, and only Warnings; then the kubelet's events of the
		// last half hour, not the scheduler's or node-problem-detector's.
		lists := strings.Split(out, "NAMESPACE ")
		if len(lists) != 3 {
			t.Fatalf("evctl get printed %d lists, want 2:\n%s", len(lists)-1, out)
		}
		warnings, kubelet := lists[1], lists[2]
		for _, want := range []string{"FailedScheduling", "OOMKilling", "BackOff"} {
			if !strings.Contains(warnings, want) {
				t.Errorf("evctl get -A --type Warning printed no %s:\n%s", want, out)
			}
		}
		if strings.Contains(warnings, " Normal ") {
			t.Errorf("evctl get -A --type Warning printed a Normal event:\n%s", out)
		}
		for _, want := range []string{"BackOff", "Started container worker", "Started container web"} {
			if !strings.Contains(kubelet, want) {
				t.Errorf("evctl get -A --controller kubelet printed no %q:\n%s", want, out)
			}
		}
		for _, not := range []string{"FailedScheduling", "OOMKilling"} {
			if strings.Contains(kubelet, not) {
				t.Errorf("evctl get -A --controller kubelet printed %s, not the kubelet's:\n%s", not, out)
			}
		}

		// The timeline block: the batch pod's timeline, then the
		// crashlooping pod's kept live; an event the test writes about
		// that pod appears.
		term, stop := r.terminal(blocks[wrTimeline], "Back-off restarting failed container web")
		for _, want := range []string{"FailedScheduling", "Successfully assigned batch/report-28741530-qz7kd to node-2", "Successfully assigned shop/web-7f6d9c8b5-xk2lp to node-2"} {
			if !strings.Contains(term.Output(), want) {
				t.Errorf("the timeline block did not print %q:\n%s", want, term.Output())
			}
		}
		waitPrinted(t, term, cs, "web-7f6d9c8b5-xk2lp.live-timeline", corev1.EventTypeNormal, "the timeline is live")
		stop()

		// evctl watch: the Warnings, then a new one as it is written.
		term, stop = r.terminal(blocks[wrWatch], "Back-off restarting failed container web")
		waitPrinted(t, term, cs, "web-7f6d9c8b5-xk2lp.live-watch", corev1.EventTypeWarning, "evctl watch follows")
		stop()

		// kubectl: three lists, then kubectl get -w following a new event.
		// The three lists end before kubectl get -w starts: its list is
		// the block's second with a NAMESPACE header (after -o wide's),
		// and the event written after it shows kubectl following.
		term, stop = r.terminal(blocks[wrKubectl], "NAMESPACE")
		waitCount(t, term, "NAMESPACE ", 2)
		waitPrinted(t, term, cs, "web-7f6d9c8b5-xk2lp.live-kubectl", corev1.EventTypeNormal, "kubectl -w follows")
		out = term.Output()
		if i := strings.LastIndex(out, "NAMESPACE "); !strings.Contains(out[i:], "kubectl -w follows") {
			t.Errorf("kubectl get events -A -w did not print the new event:\n%s", out)
		}
		for _, want := range []string{"batch       ", "report-28741530-qz7kd", "Back-off restarting failed container web", "Started container worker"} {
			if !strings.Contains(out, want) {
				t.Errorf("the kubectl block did not print %q:\n%s", want, out)
			}
		}
		stop()

		out, err = r.run(blocks[wrReporting])
		if err != nil {
			t.Fatal(err)
		}
		// The kubelet of node-1 reported worker-0's events, and not the
		// crashlooping pod's (node-2's).
		if !strings.Contains(out, "pod/worker-0") || strings.Contains(out, "web-7f6d9c8b5-xk2lp") {
			t.Errorf("kubelet on node-1's events:\n%s", out)
		}

		out, err = r.run(blocks[wrCreate])
		if err != nil {
			t.Fatal(err)
		}
		// Created as core/v1, read back in events.k8s.io/v1's shape.
		for _, want := range []string{"event/web-7f6d9c8b5-xk2lp.manual created", "apiVersion: events.k8s.io/v1", "note: Liveness probe failed (written by hand)", "regarding:", "name: web-7f6d9c8b5-xk2lp\n", "deprecatedSource:", "type: Warning"} {
			if !strings.Contains(out, want) {
				t.Errorf("the hand-written event's block did not print %q:\n%s", want, out)
			}
		}

		out, err = r.run(blocks[wrApply])
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "web-7f6d9c8b5-xk2lp.manual serverside-applied") {
			t.Errorf("kubectl apply --server-side printed:\n%s", out)
		}
		ev, err := cs.EventsV1().Events("shop").Get(context.Background(), "web-7f6d9c8b5-xk2lp.manual", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ev.Labels["team"] != "web" || ev.Note != "Liveness probe failed (written by hand)" {
			t.Errorf("after the apply: labels %v, note %q; want team=web and the note kept", ev.Labels, ev.Note)
		}
		// The managed fields the prose names: kubectl-create's write,
		// then kubectl's apply owning the label.
		managers := map[string]metav1.ManagedFieldsOperationType{}
		for _, f := range ev.ManagedFields {
			managers[f.Manager] = f.Operation
		}
		if managers["kubectl-create"] != metav1.ManagedFieldsOperationUpdate || managers["kubectl"] != metav1.ManagedFieldsOperationApply {
			t.Errorf("the event's managed fields: %v, want kubectl-create's Update and kubectl's Apply", managers)
		}
	})

	t.Run("getting-started", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		defer func() { t.Logf("%v", time.Since(start).Round(time.Millisecond)) }()
		blocks := pageBlocks(t, gettingStartedDoc, []string{gsRun, gsBuild}, nil)
		// go on PATH: the build block's go is the one running the tests.
		bin := pathWith(t, map[string]string{"eventsd": eventsdtest.Binary(t), "go": buildcache.GoTool()})
		r := newReader(t, root(), bin, "")

		demo, stop := r.terminal(replace(t, blocks[gsRun], "go run ./cmd/eventsd --demo", eventsdCmd), demoReady)
		demoStory(t, eventsdClient(servingAddr(t, demo)))
		stop()

		// The build writes into the test's directory, not the
		// repository's bin/ (the test must leave the clone as it was).
		out := t.TempDir() + "/"
		block := replace(t, blocks[gsBuild], "-o bin/", "-o "+out)
		block = replace(t, block, "bin/eventsd --demo", out+"eventsd --demo --listen 127.0.0.1:0")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		term, err := doctest.Start(doctest.Command{Block: block, Dir: r.dir, Env: r.env})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { t.Logf("$ %s(stopped)\n%s", block, term.Stop(30*time.Second)) }()
		if err := term.WaitFor(ctx, demoReady); err != nil {
			t.Fatal(err)
		}
		addr := servingAddr(t, term)
		demoStory(t, eventsdClient(addr))
		// The evctl built beside it reads the demo.
		got, err := r.run(out + "evctl --server http://" + addr + " get -A --type Warning --since 1h")
		if err != nil || !strings.Contains(got, "BackOff") {
			t.Errorf("the built evctl against the built eventsd: %v\n%s", err, got)
		}
	})
}

// waitCount waits until term has printed s at least n times.
func waitCount(t *testing.T, term *doctest.Terminal, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(term.Output(), s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the block printed %q fewer than %d times:\n%s", s, n, term.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// demoStory checks that the eventsd cs talks to serves the demo's story:
// the crashlooping pod's BackOff series, worker-0's OOM kill on node-1.
func demoStory(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	list, err := cs.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range list.Items {
		seen[e.Reason+" "+e.InvolvedObject.Name] = true
	}
	for _, want := range []string{"BackOff web-7f6d9c8b5-xk2lp", "OOMKilling node-1", "FailedScheduling report-28741530-qz7kd"} {
		if !seen[want] {
			t.Errorf("the demo serves no Warning %s: %v", want, seen)
		}
	}
}

// waitPrinted writes an event about the pod its name starts with, with a
// message of its own, and waits until term prints that message.
func waitPrinted(t *testing.T, term *doctest.Terminal, cs kubernetes.Interface, name, typ, message string) {
	t.Helper()
	now := metav1.Now()
	pod, _, _ := strings.Cut(name, ".")
	e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "shop", Name: pod},
		Reason:         "Test", Message: message, Type: typ, Count: 1, FirstTimestamp: now, LastTimestamp: now,
		Source: corev1.EventSource{Component: "test", Host: "node-2"}}
	if _, err := cs.CoreV1().Events("shop").Create(context.Background(), e, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := term.WaitFor(ctx, message); err != nil {
		t.Error(err)
	}
}
