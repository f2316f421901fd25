package nodeagent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCRITarget(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"unix:///run/containerd/containerd.sock": "unix:///run/containerd/containerd.sock",
		"/run/containerd/containerd.sock":        "unix:///run/containerd/containerd.sock",
		"/tmp/fakecri.sock":                      "unix:///tmp/fakecri.sock",
		"fakecri.sock":                           "unix://" + filepath.Join(wd, "fakecri.sock"),
	} {
		got, err := criTarget(in)
		if err != nil || got != want {
			t.Errorf("criTarget(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "unix://", "tcp://127.0.0.1:10010", "npipe:////./pipe/x"} {
		if got, err := criTarget(in); err == nil {
			t.Errorf("criTarget(%q) = %q, want an error", in, got)
		}
	}
}

const kubeconfigYAML = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: secret}
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
`

// TestRestConfigLoadingRules: without --server and --kubeconfig the agent
// takes $KUBECONFIG as kubectl does; --server overrides its server; with
// no kubeconfig anywhere the error says what to give.
func TestRestConfigLoadingRules(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "config")
	if err := os.WriteFile(kc, []byte(kubeconfigYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kc)
	cfg, err := restConfig(Options{})
	if err != nil || cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "secret" {
		t.Fatalf("from $KUBECONFIG: %+v, %v", cfg, err)
	}
	cfg, err = restConfig(Options{Server: "http://127.0.0.1:8080"})
	if err != nil || cfg.Host != "http://127.0.0.1:8080" {
		t.Fatalf("--server over $KUBECONFIG: %+v, %v", cfg, err)
	}

	t.Setenv("KUBECONFIG", filepath.Join(dir, "missing"))
	cfg, err = restConfig(Options{Server: "http://127.0.0.1:8080"})
	if err != nil || cfg.Host != "http://127.0.0.1:8080" {
		t.Fatalf("--server alone: %+v, %v", cfg, err)
	}
	if _, err := restConfig(Options{Kubeconfig: filepath.Join(dir, "missing")}); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("a missing --kubeconfig: %v", err)
	}

	var stderr bytes.Buffer
	cmd := NewCommand(&stderr)
	cmd.SetArgs([]string{"--runtime-endpoint", "/run/x.sock"})
	cmd.SetErr(&stderr)
	err = cmd.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no API server to record events to: give --server or --kubeconfig, or a kubeconfig in $KUBECONFIG or") {
		t.Errorf("no kubeconfig anywhere: %v", err)
	}
}
