package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// rateLimitConfig writes an AdmissionConfiguration naming an
// EventRateLimit Configuration file, as kube-apiserver's docs show it, and
// returns the AdmissionConfiguration's path.
func rateLimitConfig(t *testing.T, limits string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"admission.yaml":   "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: EventRateLimit\n  path: eventconfig.yaml\n",
		"eventconfig.yaml": "apiVersion: eventratelimit.admission.k8s.io/v1alpha1\nkind: Configuration\nlimits:\n" + limits,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "admission.yaml")
}

// TestEventRateLimitFlag: eventsd started with --admission-control-config-file
// refuses event writes beyond the configured Namespace limit with 429,
// Retry-After and details.retryAfterSeconds, counts the refusals in
// /metrics, and the project's recorder, writing through client-go's own
// EventSinkImpl, still stores every occurrence.
func TestEventRateLimitFlag(t *testing.T) {
	t.Parallel()
	cfg := rateLimitConfig(t, "- type: Namespace\n  qps: 1\n  burst: 2\n")
	p := eventsdtest.Start(t, eventsdtest.Options{Args: []string{"--admission-control-config-file", cfg}})
	cs := p.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ns = "ratelimit"
	post := func(name string) error {
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: ns},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web"},
			Reason:         "Started", Message: "started", Type: corev1.EventTypeNormal,
		}
		// Once: client-go's own retry after the Retry-After is off.
		return cs.CoreV1().RESTClient().Post().Namespace(ns).Resource("events").Body(ev).MaxRetries(0).Do(ctx).Error()
	}
	var err error
	for i := 0; err == nil && i < 10; i++ {
		err = post(fmt.Sprintf("e%d", i))
	}
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "limit reached on type Namespace for key "+ns) {
		t.Fatalf("got %v, want 429 naming the Namespace limit", err)
	}
	if s, ok := apierrors.SuggestsClientDelay(err); !ok || s != 1 {
		t.Errorf("details.retryAfterSeconds %d (%v), want 1", s, ok)
	}
	resp, err := http.Get(p.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `eventsd_event_rate_limit_refusals_total{type="Namespace"} 1`) {
		t.Errorf("/metrics does not count the refusal:\n%s", body)
	}

	// A small storm through the recorder and client-go's EventSinkImpl:
	// client-go waits out the Retry-After and retries, and the recorder
	// backs off beyond that.
	_, rec := ourRecordStart(t, cs, "ratelimit-test")
	const n = 5
	pod := ourRecordPod(ns, "db")
	for range n {
		rec.Event(pod, corev1.EventTypeWarning, "BackOff", "back-off restarting failed container")
	}
	ourRecordPoll(t, fmt.Sprintf("one event with count %d", n), func() (bool, string) {
		items := ourRecordEvents(t, cs, ns, "db")
		return len(items) == 1 && items[0].Count == n, fmt.Sprintf("%+v", items)
	})
}

// TestEventRateLimitBadConfig: an invalid configuration stops eventsd at
// start with upstream's validation message and the flag named.
func TestEventRateLimitBadConfig(t *testing.T) {
	t.Parallel()
	cfg := rateLimitConfig(t, "- type: Namespace\n  qps: 0\n  burst: 2\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, eventsdtest.Binary(t), "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--admission-control-config-file", cfg).CombinedOutput()
	if err == nil {
		t.Fatalf("eventsd started with an invalid configuration:\n%s", out)
	}
	for _, want := range []string{"--admission-control-config-file", "limits[0].qps: Invalid value: 0: must be positive"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
}
