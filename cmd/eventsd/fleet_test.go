package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/eventapi"
)

// kubeconfigOf writes a kubeconfig whose current context reaches server
// over plain HTTP.
func kubeconfigOf(t *testing.T, name, server string) string {
	t.Helper()
	return writeFile(t, name+".kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
users:
- name: %[1]s
  user: {}
contexts:
- name: %[1]s
  context: {cluster: %[1]s, user: %[1]s}
current-context: %[1]s
`, name, server))
}

// sourcesConfig writes a SourcesConfiguration of the given sources' YAML.
func sourcesConfig(t *testing.T, sources ...string) string {
	t.Helper()
	return writeFile(t, "sources.yaml", "apiVersion: eventsd.kubevents.io/v1alpha1\nkind: SourcesConfiguration\nsources:\n"+strings.Join(sources, ""))
}

// TestSourcesConfigFlag: --sources-config is refused beside the single
// source's flags, and a bad file or kubeconfig keeps eventsd from starting
// with an error naming the flag, the file and the source's field, with
// nothing created on disk.
func TestSourcesConfigFlag(t *testing.T) {
	kc := kubeconfigOf(t, "east", "http://127.0.0.1:1")
	good := sourcesConfig(t, "- name: east\n  kubeconfig: "+kc+"\n")
	badName := sourcesConfig(t, "- name: east\n  kubeconfig: "+kc+"\n- name: West\n  kubeconfig: "+kc+"\n")
	missingKC := filepath.Join(t.TempDir(), "nowhere.kubeconfig")
	badKC := sourcesConfig(t, "- name: east\n  kubeconfig: "+kc+"\n- name: west\n  kubeconfig: "+missingKC+"\n")
	badContext := sourcesConfig(t, "- name: east\n  kubeconfig: "+kc+"\n  context: nope\n")
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"with --source-kubeconfig", []string{"--sources-config", good, "--source-kubeconfig", kc}, []string{"--sources-config", "--source-kubeconfig", "not both"}},
		{"with --source-qps", []string{"--sources-config", good, "--source-qps", "5"}, []string{"--sources-config", "--source-qps", "not both"}},
		{"with --lineage-kubeconfig", []string{"--sources-config", good, "--lineage-kubeconfig", kc}, []string{"--lineage-kubeconfig", "--sources-config"}},
		{"with --demo", []string{"--sources-config", good, "--demo"}, []string{"--demo", "--sources-config"}},
		{"bad name", []string{"--sources-config", badName}, []string{"--sources-config", badName, `sources[1].name: Invalid value: "West"`}},
		{"missing kubeconfig", []string{"--sources-config", badKC}, []string{"--sources-config", badKC, "sources[1] (west)", missingKC}},
		{"missing context", []string{"--sources-config", badContext}, []string{"sources[0] (east)", `has no context "nope"`}},
		{"missing file", []string{"--sources-config", missing}, []string{"--sources-config", missing}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			cmd := newCommand()
			cmd.SetArgs(append([]string{"--listen", "127.0.0.1:0", "--data-dir", dir, "--log-level", "error"}, tc.args...))
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
			err := cmd.ExecuteContext(ctx)
			cancel()
			if err == nil {
				t.Fatal("eventsd accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
			if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
				t.Errorf("the refused start created %s (%v)", dir, serr)
			}
		})
	}
}

// TestFleetSourceRefusingDoesNotStallOthers: of two sources, one (another
// eventsd, serving its own writes) is mirrored and served at
// /clusters/good/ while the other refuses every request (403): only the
// refusing one's readiness check (mirror-bad) fails, its errors are
// counted under its source label, and the root serves no cluster's
// events but the fleet's list.
func TestFleetSourceRefusingDoesNotStallOthers(t *testing.T) {
	upstream, stopUpstream := runEventsd(t)
	defer stopUpstream()
	ctx := context.Background()
	ucs := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + upstream})
	for _, n := range []string{"one", "two"} {
		if _, err := ucs.CoreV1().Events("shop").Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: n},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "p"},
			Reason:         "Started", Message: n, Type: corev1.EventTypeNormal,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden, Message: "events is forbidden"})
	}))
	defer refusing.Close()
	cfg := sourcesConfig(t,
		"- name: bad\n  kubeconfig: "+kubeconfigOf(t, "bad", refusing.URL)+"\n",
		"- name: good\n  kubeconfig: "+kubeconfigOf(t, "good", "http://"+upstream)+"\n  qps: 50\n")

	addr, stop := startEventsdReady(t, "/readyz?exclude=mirror-bad", "--data-dir", t.TempDir(), "--sources-config", cfg)
	defer stop()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz?verbose"); code == http.StatusOK || !strings.Contains(body, "[-]mirror-bad failed") || !strings.Contains(body, "[+]mirror-good ok") {
		t.Errorf("/readyz with the refusing source: %d\n%s", code, body)
	}

	good := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + addr + "/clusters/good"})
	list, err := good.CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 || list.Items[0].Name != "one" || list.Items[1].Name != "two" || list.Items[0].Namespace != "shop" {
		t.Errorf("/clusters/good/ lists %+v", list.Items)
	}
	if _, err := good.CoreV1().Events("shop").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "local"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "p"}}, metav1.CreateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "read-only") {
		t.Errorf("a write to a mirrored cluster: %v", err)
	}
	// The root of a fleet of two is the root cluster: none of the
	// sources' events, and read-only.
	root := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + addr})
	if rl, err := root.CoreV1().Events("").List(ctx, metav1.ListOptions{}); err != nil || len(rl.Items) != 0 {
		t.Errorf("the root lists %v, %v", rl, err)
	}
	if _, err := root.CoreV1().Events("shop").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "local"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "p"}}, metav1.CreateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "/clusters/NAME/") {
		t.Errorf("a write to the root of a fleet: %v", err)
	}
	code, body := get("/clusters/")
	var clusters eventapi.ClusterList
	if err := json.Unmarshal([]byte(body), &clusters); code != http.StatusOK || err != nil || len(clusters.Items) != 2 ||
		clusters.Items[0].Name != "bad" || clusters.Items[1].Name != "good" || !clusters.Items[1].ReadOnly {
		t.Errorf("/clusters/: %d %s", code, body)
	}
	// Each source's metrics carry its label.
	_, metrics := get("/metrics")
	for _, want := range []string{`eventsd_mirror_source_errors_total{code="403",source="bad"}`, `eventsd_mirror_synced{source="good"} 1`, `eventsd_mirror_synced{source="bad"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestFleetOfOneAtRoot: with one source in --sources-config, the root
// serves its cluster, as a single --source-kubeconfig does, and so does
// /clusters/NAME/; its readiness check is mirror-NAME.
func TestFleetOfOneAtRoot(t *testing.T) {
	upstream, stopUpstream := runEventsd(t)
	defer stopUpstream()
	ctx := context.Background()
	ucs := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + upstream})
	if _, err := ucs.CoreV1().Events("shop").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "only"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "p"},
		Reason:         "Started", Message: "only", Type: corev1.EventTypeNormal,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := sourcesConfig(t, "- name: solo\n  kubeconfig: "+kubeconfigOf(t, "solo", "http://"+upstream)+"\n")
	addr, stop := startEventsd(t, "--data-dir", t.TempDir(), "--sources-config", cfg)
	defer stop()
	for _, path := range []string{"", "/clusters/solo"} {
		cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + addr + path})
		l, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != 1 || l.Items[0].Name != "only" || l.Items[0].Namespace != "shop" {
			t.Errorf("%q lists %v, %v", path, l, err)
		}
	}
	resp, err := http.Get("http://" + addr + "/readyz?verbose")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "[+]mirror-solo ok") {
		t.Errorf("/readyz?verbose:\n%s", body)
	}
}
