package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kubevents/kubevents/access"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

// benchPolicy is a 10-line ABAC policy whose last line is the one that
// lets the benchmark's user create events, so every create is checked
// against all of them.
func benchPolicy() string {
	var b strings.Builder
	for i := range 9 {
		fmt.Fprintf(&b, `{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "user-%d", "namespace": "ns-%d", "apiGroup": "*", "resource": "events"}}`+"\n", i, i)
	}
	b.WriteString(`{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "bench", "namespace": "default", "apiGroup": "*", "resource": "events"}}` + "\n")
	return b.String()
}

// BenchmarkServerCreateAuthz is BenchmarkServerCreate without
// authentication and authorization (off), with a static token (token),
// with a static token and the 10-line ABAC policy (abac), and with those
// and event rate limits of every type that refuse nothing (abac+limits):
// issue 12's "on versus off" in one run. cpu-ns/op is the process's CPU
// time (server and in-process clients) per create.
func BenchmarkServerCreateAuthz(b *testing.B) {
	for _, mode := range []string{"off", "token", "abac", "abac+limits"} {
		b.Run(mode, func(b *testing.B) {
			dir := b.TempDir()
			var opts access.Options
			if mode != "off" {
				opts.TokenAuthFile = writeBenchFile(b, dir+"/tokens.csv", "bench-token,bench,1\n")
			}
			if strings.HasPrefix(mode, "abac") {
				opts.AuthorizationModes = []string{access.ModeABAC}
				opts.PolicyFile = writeBenchFile(b, dir+"/policy.jsonl", benchPolicy())
			}
			built, err := access.Build(opts)
			if err != nil {
				b.Fatal(err)
			}
			cfg := server.Config{Authenticator: built.Authenticator, Authorizer: built.Authorizer}
			if mode == "abac+limits" {
				cfg.EventRateLimit = generousLimits(b)
			}
			benchCreates(b, cfg, "bench-token")
		})
	}
}

func writeBenchFile(b *testing.B, path, content string) string {
	b.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// benchCreates measures creates through a server built from cfg on a
// pebble store on disk, from 32 parallel clients sending token (if any),
// and reports the process's CPU per create as cpu-ns/op: what a change to
// the server's path costs, less sensitive than ns/op to fsync latency.
func benchCreates(b *testing.B, cfg server.Config, token string) {
	log := slog.New(slog.DiscardHandler)
	store, err := pebblestore.Open(pebblestore.Options{Dir: b.TempDir() + "/data", Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	cfg.Store, cfg.Logger = store, log
	srv, err := server.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() {
		hs.Close()
		_ = srv.Drain(context.Background())
	}()
	url := hs.URL + "/api/v1/namespaces/default/events"
	var n atomic.Int64
	b.SetParallelism(32)
	cpu0 := processCPU(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		for pb.Next() {
			body := protobufEvent(b, fmt.Sprintf("web.%x", n.Add(1)))
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/vnd.kubernetes.protobuf")
			req.Header.Set("Accept", "application/vnd.kubernetes.protobuf,application/json")
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// processCPU is the user and system CPU time the process has used.
func processCPU(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
