package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// noNoise fails the test if a failed start's output has a log warning or
// error, or a Go stack, beside its error; with oneLine, anything beside.
func noNoise(t *testing.T, what, out string, oneLine bool) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if oneLine && len(lines) != 1 || strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") ||
		strings.Contains(out, "goroutine ") || strings.Contains(out, ".go:") {
		t.Errorf("%s: want only the error, got %d lines:\n%s", what, len(lines), out)
	}
}

// TestBadSourceKubeconfig: a --source-kubeconfig that cannot be read or
// parsed is refused before the store is opened: one error line naming the
// flag (no warning, no stack), and no data directory created.
func TestBadSourceKubeconfig(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	garbage := filepath.Join(base, "garbage.kubeconfig")
	if err := os.WriteFile(garbage, []byte("clusters: [this is not\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noContext := filepath.Join(base, "empty.kubeconfig")
	if err := os.WriteFile(noContext, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kc := range []string{filepath.Join(base, "missing.kubeconfig"), garbage, noContext} {
		newDir := filepath.Join(base, "new")
		out := failedStart(t, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(newDir, "data"), "--source-kubeconfig", kc)
		if kc == noContext && !strings.Contains(out, "has no current context: name one with --source-context") {
			t.Errorf("a kubeconfig without a current context: %s", out)
		}
		if !strings.Contains(out, "--source-kubeconfig "+kc) {
			t.Errorf("%s: the error does not name the flag and file:\n%s", kc, out)
		}
		noNoise(t, kc, out, true)
		if _, err := os.Stat(newDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the data directory was created (%v)", kc, err)
		}
	}
}

// writeKubeconfig writes a kubeconfig whose current context is server,
// as the README's tour makes eventsd kubectl's current context.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: eventsd
  cluster: {server: %s}
contexts:
- name: eventsd
  context: {cluster: eventsd, user: me}
current-context: eventsd
users:
- name: me
  user: {}
`, server)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMirrorRefusesItself: eventsd whose source is itself (its kubeconfig
// names its own address) exits with an error saying so, leaving no data
// directory it created; a source that is another eventsd is mirrored.
func TestMirrorRefusesItself(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dataDir := filepath.Join(t.TempDir(), "data")
	out := failedStart(t, "--listen", addr, "--data-dir", dataDir, "--source-kubeconfig", writeKubeconfig(t, "http://"+addr))
	if !strings.Contains(out, "is this eventsd itself") || !strings.Contains(out, "--source-kubeconfig") || !strings.Contains(out, "http://"+addr) {
		t.Errorf("eventsd mirroring itself says:\n%s", out)
	}
	if strings.Contains(out, "the source failed") {
		t.Errorf("the refusal was retried as a failure:\n%s", out)
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the data directory the refused start created is left (%v)", err)
	}

	src := eventsdtest.Start(t, eventsdtest.Options{})
	cgCreateCore(t, src.Clientset(), cgCoreEvent("default", "web-1.other", "web-1"))
	mir := eventsdtest.Start(t, eventsdtest.Options{Args: []string{"--source-kubeconfig", src.Kubeconfig()}})
	// Ready means the source's events were read.
	if _, err := mir.Clientset().CoreV1().Events("default").Get(context.Background(), "web-1.other", metav1.GetOptions{}); err != nil {
		t.Errorf("the event of another eventsd, mirrored: %v", err)
	}
}

// TestMirrorRefusesLocalEvents: a mirror started on a data directory
// holding events of eventsd's own API is refused, naming the directory,
// an event and the flag that lets it go on; with the flag it mirrors,
// keeping the local events, and later starts need the flag no more.
func TestMirrorRefusesLocalEvents(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	local := eventsdtest.Start(t, eventsdtest.Options{DataDir: dataDir})
	cgCreateCore(t, local.Clientset(), cgCoreEvent("default", "web-1.manual", "web-1"))
	local.Stop()

	src := eventsdtest.Start(t, eventsdtest.Options{})
	cgCreateCore(t, src.Clientset(), cgCoreEvent("default", "web-1.crash", "web-1"))
	kc := src.Kubeconfig()
	out := failedStart(t, "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--source-kubeconfig", kc)
	for _, want := range []string{"--data-dir " + dataDir, "default/web-1.manual", "--source-allow-existing-events"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	noNoise(t, "a mirror on local events", out, false)

	mir := eventsdtest.Start(t, eventsdtest.Options{DataDir: dataDir, Args: []string{"--source-kubeconfig", kc, "--source-allow-existing-events"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{"web-1.manual", "web-1.crash"} {
		if _, err := mir.Clientset().CoreV1().Events("default").Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("%s in the mirror allowed to go on: %v", name, err)
		}
	}
	mir.Stop()
	again := eventsdtest.Start(t, eventsdtest.Options{DataDir: dataDir, Args: []string{"--source-kubeconfig", kc}})
	again.Stop()
}
