package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReportPathsHomeRelative: a report writes the home directory of the
// machine that ran it as ~, in paths and in flags' values of the command,
// so that BENCHMARKS.md names no developer's machine; other paths stay.
func TestReportPathsHomeRelative(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil || home == "/" {
		t.Skipf("no home directory to hide (%q, %v)", home, err)
	}
	bin := filepath.Join(home, ".cache", "kubevents", "etcd")
	if got := homeRelative(bin); got != "~/.cache/kubevents/etcd" {
		t.Errorf("homeRelative(%s) = %s", bin, got)
	}
	if got := homeRelative("/tmp/eb/eventsd"); got != "/tmp/eb/eventsd" {
		t.Errorf("a path outside home changed: %s", got)
	}
	got := shellJoin([]string{"eventsbench", "run", "--etcd-binary", bin, "--kube-apiserver=" + bin, "--out", "a b.json"})
	want := "eventsbench run --etcd-binary ~/.cache/kubevents/etcd --kube-apiserver=~/.cache/kubevents/etcd --out 'a b.json'"
	if got != want {
		t.Errorf("shellJoin = %s\nwant %s", got, want)
	}
}
