package readme

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubevents/kubevents/export/otlp"
	"github.com/kubevents/kubevents/export/otlp/otlptest"
	"github.com/kubevents/kubevents/export/webhook/webhooktest"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/kubeapiserver"
)

// exportDoc is the page whose commands TestExportPage runs.
const exportDoc = "docs/export.md"

// TestExportPage runs docs/export.md's commands as a reader would and
// checks what the page says each does: the example's sinks (their
// Slack-compatible webhook and OpenTelemetry collector stood for by
// loopback receivers) get every Warning and everything, deletions
// included; the demo with a file sink exports what is written after it
// started (the demo's whole story, its store being new, and the
// hand-written event); and a mirror of a real kube-apiserver's events exports them to
// the same sinks.
func TestExportPage(t *testing.T) {
	t.Parallel()
	const (
		sinks  = "cat >export-sinks.yaml <<'EOF'"
		file   = "cat >export-file.yaml <<'EOF'"
		write  = `now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"`
		mirror = "cat >retention-warnings.yaml <<'EOF'"
	)
	blocks := pageBlocks(t, exportDoc, []string{sinks, file, write, mirror}, nil)
	r := newPageReader(t, exportDoc, blocks, commandsBin(t))
	slack := webhooktest.New(t, webhooktest.Options{})
	collector := otlptest.Start(t, otlptest.Options{})
	addr := eventsdtest.FreeAddr(t)
	// eventsd is built once and on PATH (go run would build it again at
	// each block), and listens on a free port instead of 8080, which
	// another test may hold; the blocks reach it there. The example's
	// Slack webhook and collector are loopback receivers: nothing here
	// reaches hooks.slack.com or a cluster's collector.
	r.substitute("go run ./cmd/eventsd", "eventsd --listen "+addr)
	r.substitute("127.0.0.1:8080", addr)
	r.substitute("https://hooks.slack.com/services/T000/B000/XXXX", slack.URL())
	r.substitute("otel-collector.monitoring:4317", collector.GRPCEndpoint())
	ctx := context.Background()

	// The example: a Warning and a Normal event written, the Normal one
	// deleted.
	stop := r.start(sinks, "eventsd serving")
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + addr})
	warning := writeEvent(t, cs, "warn-1", corev1.EventTypeWarning, "a Warning for Slack")
	normal := writeEvent(t, cs, "normal-1", corev1.EventTypeNormal, "a Normal event for the collector only")
	if err := cs.CoreV1().Events("default").Delete(ctx, normal.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	checkCollector(t, collector, map[string][]watch.EventType{warning.Name: {watch.Added}, normal.Name: {watch.Added, watch.Deleted}})
	checkSlack(t, slack, warning.Message, normal.Message)
	stop()

	// The demo with a file sink, and an event written by hand.
	stop = r.start(file, "demo: wrote the story's events")
	out := r.run(write)
	if !strings.Contains(out, "Stopping container worker (written by hand)") {
		t.Errorf("the hand-written event's record is not in events.jsonl:\n%s", out)
	}
	stop()
	// The demo's store is new: the sink's first run is at revision 0,
	// so the story is exported too (its OOM kill and Node going
	// NotReady, written once), before the hand-written event.
	var reasons []string
	for _, rec := range jsonLines(t, filepath.Join(r.dir, "events.jsonl")) {
		reasons = append(reasons, rec.Event.Reason)
	}
	oom, handWritten := slices.Index(reasons, "OOMKilling"), slices.Index(reasons, "Killing")
	if oom < 0 || !slices.Contains(reasons, "NodeNotReady") || handWritten < oom {
		t.Errorf("events.jsonl has records of reasons %v; want the story's OOMKilling and NodeNotReady, then the hand-written Killing", reasons)
	}

	// A mirror of a cluster (its context prod in the reader's
	// ~/.kube/config) exporting to the example's sinks.
	kas := kubeapiserver.Start(t, kubeapiserver.Options{})
	kc, err := clientcmd.LoadFromFile(kas.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	kc.Contexts["prod"] = kc.Contexts[kc.CurrentContext]
	if err := clientcmd.WriteToFile(*kc, filepath.Join(r.home, ".kube", "config")); err != nil {
		t.Fatal(err)
	}
	stop = r.start(mirror, "eventsd serving")
	cluster := kubernetes.NewForConfigOrDie(kas.RESTConfig())
	warning = writeEvent(t, cluster, "cluster-warn-1", corev1.EventTypeWarning, "a Warning of the cluster")
	normal = writeEvent(t, cluster, "cluster-normal-1", corev1.EventTypeNormal, "a Normal event of the cluster")
	checkCollector(t, collector, map[string][]watch.EventType{warning.Name: {watch.Added}, normal.Name: {watch.Added}})
	checkSlack(t, slack, warning.Message, normal.Message)
	// A month of Warnings, a day of the rest, of the cluster's events.
	logs := stop()
	for _, want := range []string{`msg="mirroring a cluster's events" source="context \"prod\" of ` + filepath.Join(r.home, ".kube", "config") + `" server=` + kas.URL(),
		`msg="retention rule" rule=warnings ttl=720h types=Warning`, `msg="retention rule" rule=default ttl=24h0m0s`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the mirror did not log %s:\n%s", want, logs)
		}
	}
}

// writeEvent creates an event about a pod in namespace default.
func writeEvent(t *testing.T, cs kubernetes.Interface, pod, typ, message string) *corev1.Event {
	t.Helper()
	now := metav1.Now()
	ev, err := cs.CoreV1().Events("default").Create(context.Background(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: pod + "."},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Name: pod},
		Reason:         "Testing", Message: message, Type: typ, Count: 1, FirstTimestamp: now, LastTimestamp: now,
		Source: corev1.EventSource{Component: "test"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// checkCollector waits until the collector received the changes (by
// event name, in order) and checks it did.
func checkCollector(t *testing.T, c *otlptest.Receiver, want map[string][]watch.EventType) {
	t.Helper()
	var got map[string][]watch.EventType
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		got = map[string][]watch.EventType{}
		for _, rec := range c.Records() {
			name, _ := rec.Attributes[otlp.AttrEventName].(string)
			change, _ := rec.Attributes[otlp.AttrChangeType].(string)
			if _, ok := want[name]; ok {
				got[name] = append(got[name], watch.EventType(change))
			}
		}
		if len(got) == len(want) && func() bool {
			for name, w := range want {
				if !slices.Equal(got[name], w) {
					return false
				}
			}
			return true
		}() {
			return
		}
	}
	t.Errorf("the collector received %v of the events, want %v; it has %d records", got, want, len(c.Records()))
}

// checkSlack waits until the Slack-compatible webhook received a message
// with the Warning's and checks none has the Normal event's.
func checkSlack(t *testing.T, s *webhooktest.Receiver, warning, normal string) {
	t.Helper()
	var texts []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		texts = texts[:0]
		for _, req := range s.Requests() {
			texts = append(texts, req.Text)
		}
		if strings.Contains(strings.Join(texts, "\n"), warning) {
			break
		}
	}
	all := strings.Join(texts, "\n")
	if !strings.Contains(all, warning) || strings.Contains(all, normal) {
		t.Errorf("the Slack webhook received %q; want the Warning %q and not the Normal %q", texts, warning, normal)
	}
}

// jsonLines are the records of a file sink's file.
func jsonLines(t *testing.T, path string) []fileRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []fileRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec fileRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s: %v: %s", path, err, sc.Bytes())
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// fileRecord is a line of a file sink's file, as the page describes it.
type fileRecord struct {
	IdempotencyKey  string       `json:"idempotencyKey"`
	Type            string       `json:"type"`
	ResourceVersion string       `json:"resourceVersion"`
	Event           corev1.Event `json:"event"`
}
