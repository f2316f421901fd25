package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// foldConfigFile writes a --fold-config file folding BackOff repeats
// within an hour: long enough that the test's pace does not matter.
func foldConfigFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fold.yaml")
	err := os.WriteFile(p, []byte(`apiVersion: eventsd.kubevents.io/v1alpha1
kind: FoldConfiguration
rules:
- name: crashloop
  reasons: [BackOff]
  window: 1h
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// foldWarnings counts the Warning headers a client gets that say a
// create was folded into the named event.
type foldWarnings struct {
	mu     sync.Mutex
	folded map[string]int
}

func (w *foldWarnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, into, ok := strings.Cut(text, "was folded into the isomorphic event "); ok {
		w.folded[strings.Fields(into)[0]]++
	}
}

// foldClient is a clientset for p that hands Warning headers to w.
func foldClient(t *testing.T, p *eventsdtest.Process, w *foldWarnings) kubernetes.Interface {
	t.Helper()
	c := p.RESTConfig()
	c.WarningHandler = w
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// foldCrashloop is a naive client crashlooping n times: a typed Create
// of a new Event per restart (names as client-go makes them, timestamps
// 100 ms apart: 600 in 60 s), through clients in turn.
func foldCrashloop(t *testing.T, ctx context.Context, clients []kubernetes.Interface, pod string, n int) {
	t.Helper()
	start := time.Now().Add(-time.Duration(n) * 100 * time.Millisecond)
	for i := range n {
		at := start.Add(time.Duration(i) * 100 * time.Millisecond)
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", pod, at.UnixNano())},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod, UID: types.UID("uid-" + pod), APIVersion: "v1"},
			Reason:         "BackOff", Type: corev1.EventTypeWarning, Message: fmt.Sprintf("Back-off restarting failed container app (%d)", i),
			Source: corev1.EventSource{Component: "crashloop-script"}, Count: 1,
			FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at),
		}
		if _, err := clients[i%len(clients)].CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
}

// foldStored lists pod's BackOff events through cs: name to count.
func foldStored(t *testing.T, ctx context.Context, cs kubernetes.Interface, pod string) map[string]int32 {
	t.Helper()
	l, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod + ",reason=BackOff"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, ev := range l.Items {
		out[ev.Name] = ev.Count
	}
	return out
}

// TestFoldCrashloop: eventsd with --fold-config, on pebble and as two
// replicas over one etcd (creates alternating between them): a naive
// client's 600 creates store one event of count 600, read alike on every
// replica; 599 creates were answered with a Warning naming it; kubectl's
// create of one more is folded too (its Warning printed, count 601). An
// eventsd without --fold-config stores all 600.
func TestFoldCrashloop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(t *testing.T, args ...string) []*eventsdtest.Process
	}{
		{"pebble", func(t *testing.T, args ...string) []*eventsdtest.Process {
			return []*eventsdtest.Process{eventsdtest.Start(t, eventsdtest.Options{Args: args})}
		}},
		{"etcd-two-replicas", func(t *testing.T, args ...string) []*eventsdtest.Process {
			return etcdStartReplicas(t, 2, args...).procs
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := cgCtx(t)
			procs := tc.start(t, "--fold-config", foldConfigFile(t))
			w := &foldWarnings{folded: map[string]int{}}
			var clients []kubernetes.Interface
			for _, p := range procs {
				clients = append(clients, foldClient(t, p, w))
			}
			foldCrashloop(t, ctx, clients, "web", 600)
			var name string
			for i, cs := range clients {
				got := foldStored(t, ctx, cs, "web")
				if len(got) != 1 {
					t.Fatalf("replica %d stores %v, want one event", i, got)
				}
				for n, c := range got {
					if c != 600 {
						t.Fatalf("replica %d: %s count %d, want 600", i, n, c)
					}
					name = n
				}
			}
			if w.folded["default/"+name] != 599 || len(w.folded) != 1 {
				t.Fatalf("Warnings %v, want 599 naming default/%s", w.folded, name)
			}
			// kubectl create of one more: folded, its Warning shown.
			p := procs[len(procs)-1]
			at := time.Now().UTC().Format(time.RFC3339)
			r := kubectlOK(t, p, p.Kubeconfig(), "create", "-f", kubectlWriteFile(t, "ev.yaml", fmt.Sprintf(`apiVersion: v1
kind: Event
metadata: {name: web.kubectl, namespace: default}
involvedObject: {kind: Pod, namespace: default, name: web, uid: uid-web, apiVersion: v1}
reason: BackOff
type: Warning
message: Back-off restarting failed container app (kubectl)
source: {component: crashloop-script}
count: 1
firstTimestamp: %s
lastTimestamp: %s
`, at, at)))
			if !strings.Contains(r.Stderr, "Warning: ") || !strings.Contains(r.Stderr, "default/"+name) {
				t.Fatalf("kubectl create: stdout %q stderr %q, want a Warning naming default/%s", r.Stdout, r.Stderr, name)
			}
			r = kubectlOK(t, p, p.Kubeconfig(), "get", "events", "--field-selector", "reason=BackOff", "-o", "jsonpath={range .items[*]}{.metadata.name}={.count} {end}")
			if strings.TrimSpace(r.Stdout) != name+"=601" {
				t.Fatalf("kubectl get: %q, want %s=601", r.Stdout, name)
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		ctx := cgCtx(t)
		p := eventsdtest.Start(t, eventsdtest.Options{})
		w := &foldWarnings{folded: map[string]int{}}
		cs := foldClient(t, p, w)
		foldCrashloop(t, ctx, []kubernetes.Interface{cs}, "web", 600)
		got := foldStored(t, ctx, cs, "web")
		if len(got) != 600 || len(w.folded) != 0 {
			t.Fatalf("%d events stored, warnings %v; want 600 and none", len(got), w.folded)
		}
		for n, c := range got {
			if c != 1 {
				t.Fatalf("%s count %d", n, c)
			}
		}
	})
}
