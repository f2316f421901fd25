package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage/etcdstore/etcdtest"
)

// TestEtcdRequestTimeoutFlag: --etcd-request-timeout bounds requests
// while etcd is down: a list gets 503 with Retry-After within it, long
// before the default 10 s; /readyz fails within
// --etcd-readycheck-timeout, and passes again once etcd is back.
func TestEtcdRequestTimeoutFlag(t *testing.T) {
	dir := t.TempDir()
	e, endpoint := etcdtest.Start(t, dir)
	t.Cleanup(func() { e.Close() })
	addr, stop := runEventsd(t, "--storage-backend", "etcd", "--etcd-servers", endpoint, "--etcd-compaction-interval", "0",
		"--etcd-request-timeout", "300ms", "--etcd-readycheck-timeout", "300ms")
	defer stop()
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	closed := etcdtest.Kill(e)
	start := time.Now()
	resp, body := get("/api/v1/events")
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("a list with etcd down took %v", took)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "etcd at "+endpoint) {
		t.Fatalf("list with etcd down: %d %q", resp.StatusCode, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The health answer is cached for a second of the real clock.
		if resp, body := get("/readyz"); resp.StatusCode == http.StatusServiceUnavailable {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("/readyz with etcd down: %d %q", resp.StatusCode, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	<-closed
	e, _ = etcdtest.Start(t, dir)
	deadline = time.Now().Add(30 * time.Second)
	for {
		if resp, body := get("/readyz"); resp.StatusCode == http.StatusOK {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("/readyz after etcd returned: %d %q", resp.StatusCode, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if resp, body := get("/api/v1/events"); resp.StatusCode != http.StatusOK {
		t.Fatalf("list after etcd returned: %d %q", resp.StatusCode, body)
	}
}
