package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// failedStart runs eventsd with args, which must make it fail at start,
// and returns its output.
func failedStart(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, eventsdtest.Binary(t), args...).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || ctx.Err() != nil {
		t.Fatalf("eventsd %q: %v, want it to fail at start:\n%s", args, err, out)
	}
	return string(out)
}

// TestFailedStartLeavesNoDataDir: a start of eventsd that fails leaves no
// data directory it created: with its port in use it fails before
// creating anything, and when a sink cannot be built (after the store
// opened) it removes the directory, parents it created included. A data
// directory that existed is kept with its events.
func TestFailedStartLeavesNoDataDir(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	newDir := filepath.Join(base, "new")
	dataDir := filepath.Join(newDir, "data")
	gone := func(what string) {
		t.Helper()
		if _, err := os.Stat(newDir); !errors.Is(err, os.ErrNotExist) {
			entries, _ := os.ReadDir(dataDir)
			t.Errorf("%s: %s is left behind (%v), holding %d entries", what, newDir, err, len(entries))
		}
	}

	// The port is taken.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	out := failedStart(t, "--listen", taken.Addr().String(), "--data-dir", dataDir)
	if !strings.Contains(out, "--listen") || !strings.Contains(out, "address already in use") {
		t.Errorf("eventsd on a taken port says:\n%s", out)
	}
	gone("port in use")

	// A sink that cannot be built: its file's directory is a file.
	notDir := filepath.Join(base, "not-a-directory")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	exportConfig := filepath.Join(base, "export.yaml")
	if err := os.WriteFile(exportConfig, []byte("apiVersion: eventsd.kubevents.io/v1alpha1\nkind: ExportConfiguration\nsinks:\n- name: archive\n  file: {path: "+
		filepath.Join(notDir, "events.jsonl")+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out = failedStart(t, "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--export-config", exportConfig)
	if !strings.Contains(out, "--export-config") || !strings.Contains(out, `sink "archive"`) {
		t.Errorf("eventsd with a sink it cannot build says:\n%s", out)
	}
	if strings.Contains(out, "level=ERROR") || strings.Contains(out, "level=WARN") {
		t.Errorf("removing the data directory logged errors or warnings:\n%s", out)
	}
	gone("sink failing")

	// A data directory that exists is kept, with its events.
	p := eventsdtest.Start(t, eventsdtest.Options{DataDir: dataDir})
	if _, err := p.Clientset().CoreV1().Events("default").Create(context.Background(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "kept"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
		Reason:         "Started", Message: "kept", Type: corev1.EventTypeNormal,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	failedStart(t, "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--export-config", exportConfig)
	failedStart(t, "--listen", taken.Addr().String(), "--data-dir", dataDir)
	p.Restart()
	if _, err := p.Clientset().CoreV1().Events("default").Get(context.Background(), "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("the event in the existing data directory after failed starts: %v", err)
	}
}

// TestStartupLogsPolicies: the start-up log lists the retention rules and
// the event rate limits in force, as it lists the export sinks.
func TestStartupLogsPolicies(t *testing.T) {
	t.Parallel()
	retentionConfig := filepath.Join(t.TempDir(), "retention.yaml")
	if err := os.WriteFile(retentionConfig, []byte(`apiVersion: eventsd.kubevents.io/v1alpha1
kind: RetentionConfiguration
rules:
- name: warnings
  types: [Warning]
  ttl: 168h
- namespaces: [prod, staging]
  reasons: [BackOff]
  ttl: 24h
`), 0o600); err != nil {
		t.Fatal(err)
	}
	limits := rateLimitConfig(t, "- type: Server\n  qps: 50\n  burst: 100\n- type: Namespace\n  qps: 5\n  burst: 20\n  cacheSize: 2000\n- type: User\n  qps: 1\n  burst: 3\n")
	p := eventsdtest.Start(t, eventsdtest.Options{Args: []string{"--retention-config", retentionConfig, "--admission-control-config-file", limits, "--event-ttl", "2h"}})
	logs := p.Logs()
	serving := strings.Index(logs, `msg="eventsd serving"`)
	for _, want := range []string{
		`msg="retention rule" rule=warnings ttl=168h types=Warning`,
		`msg="retention rule" rule=1 ttl=24h namespaces=prod,staging reasons=BackOff`,
		`msg="retention rule" rule=default ttl=2h0m0s`,
		`msg="event rate limit" type=Server qps=50 burst=100` + "\n",
		`msg="event rate limit" type=Namespace qps=5 burst=20 cacheSize=2000`,
		`msg="event rate limit" type=User qps=1 burst=3 cacheSize=4096`,
	} {
		if i := strings.Index(logs, want); i < 0 || i > serving {
			t.Errorf("the start-up log lacks %q before serving:\n%s", want, logs)
		}
	}
}
