package alerting

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventmetrics"
	"github.com/kubevents/kubevents/internal/promtoolbin"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/server/servertest"
	"github.com/kubevents/kubevents/storage/pebblestore"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// alert is what the test reads of Prometheus' /api/v1/alerts.
type alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
}

// crashloopAlerts returns Prometheus' EventsCrashLooping alerts.
func crashloopAlerts(ctx context.Context, base string) ([]alert, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/alerts", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Alerts []alert `json:"alerts"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("/api/v1/alerts: %w", err)
	}
	var out []alert
	for _, a := range body.Data.Alerts {
		if a.Labels["alertname"] == "EventsCrashLooping" {
			out = append(out, a)
		}
	}
	return out, nil
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestPrometheusCrashloopAlert: a real Prometheus scrapes eventsd every
// second and evaluates the chart's rules (with a 20 s window instead of
// 10 minutes, the one value changed): a crashlooping Pod's BackOff
// events, written as the kubelet's recorder writes them (a create, then
// count patches), make EventsCrashLooping fire for that Pod, and it
// resolves once they stop.
func TestPrometheusCrashloopAlert(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Prometheus for about a minute")
	}
	bin, err := promtoolbin.Prometheus()
	if err != nil {
		t.Skipf("Prometheus could not be built from tools/promtool (it needs the Go module proxy the first time, and minutes of compiling), so the rules are not run against it: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	counter, err := eventmetrics.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := pebblestore.Open(pebblestore.Options{Dir: t.TempDir(), NoSync: true, Logger: slog.New(slog.DiscardHandler), Written: counter.Observe})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(counter)
	eventsdURL, cs := servertest.Serve(t, server.Config{Store: st, Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	target, err := url.Parse(eventsdURL)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte(specOf(t, helmTemplate(t, "--set", "prometheusRule.window=20s"))), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: eventsd
    static_configs: [{targets: [%q]}]
`, rules, target.Host)), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	prom := exec.CommandContext(ctx, bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	var logs strings.Builder
	prom.Stdout, prom.Stderr = &logs, &logs
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = prom.Process.Kill()
		_ = prom.Wait()
		if t.Failed() {
			t.Logf("Prometheus' log:\n%s", logs.String())
		}
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	// wait polls Prometheus' crashloop alerts until cond holds.
	wait := func(what string, cond func([]alert) bool) []alert {
		t.Helper()
		for {
			as, err := crashloopAlerts(ctx, base)
			if err == nil && cond(as) {
				return as
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: not within the test's time (last: %v, %v)", what, as, err)
			case <-time.After(500 * time.Millisecond):
			}
		}
	}

	// The kubelet's BackOff event about shop/web-0, its count patched
	// every second, until stopped.
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0.backoff"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "web-0", UID: types.UID("web-0-uid")},
		Type:           corev1.EventTypeWarning, Reason: "BackOff", Message: "Back-off restarting failed container", Count: 1,
		Source: corev1.EventSource{Component: "kubelet", Host: "node-1"}}
	if _, err := cs.CoreV1().Events("shop").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for n := 2; ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			patch := fmt.Appendf(nil, `{"count":%d}`, n)
			if _, err := cs.CoreV1().Events("shop").Patch(ctx, ev.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Errorf("patching the count: %v", err)
				return
			}
		}
	})
	stopped := false
	stopWriting := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopWriting()

	firing := wait("EventsCrashLooping firing", func(as []alert) bool { return len(as) == 1 && as[0].State == "firing" })
	// The default configuration keeps the object's name on Warning
	// events: the alert names the Pod and links to its timeline.
	if l := firing[0].Labels; l["namespace"] != "shop" || l["kind"] != "Pod" || l["name"] != "web-0" || l["severity"] != "warning" {
		t.Errorf("the alert's labels: %v, want namespace shop, kind Pod, name web-0, severity warning", l)
	}
	if tl := firing[0].Annotations["timeline"]; tl != "https://eventsd.example.com/ui/?object=shop/Pod/web-0" {
		t.Errorf("the alert's timeline: %q, want the Pod's", tl)
	}
	stopWriting()
	wait("EventsCrashLooping resolved", func(as []alert) bool { return len(as) == 0 })
}
