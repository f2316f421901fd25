package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/kubevents/kubevents/export"
	"github.com/kubevents/kubevents/export/webhook"
	"github.com/kubevents/kubevents/export/webhook/webhooktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds every wait of these tests.
const testTimeout = 30 * time.Second

func event(uid, ns, name, typ, reason, msg string, count int32) *corev1.Event {
	return &corev1.Event{
		TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:     metav1.ObjectMeta{Name: name + ".1", Namespace: ns, UID: types.UID(uid), ResourceVersion: "0"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name, APIVersion: "v1"},
		Type:           typ,
		Reason:         reason,
		Message:        msg,
		Count:          count,
		FirstTimestamp: metav1.NewTime(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)),
		LastTimestamp:  metav1.NewTime(time.Date(2026, 11, 24, 10, 5, 0, 0, time.UTC)),
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
	}
}

func record(t watch.EventType, ev *corev1.Event, rev int64) export.Record {
	ev = ev.DeepCopy()
	ev.ResourceVersion = fmt.Sprint(rev)
	return export.Record{Key: export.KeyOf(ev, rev), Type: t, Revision: rev, Event: ev}
}

func batchOf(n int) []export.Record {
	var b []export.Record
	for i := range n {
		b = append(b, record(watch.Added, event(fmt.Sprintf("uid-%d", i), "default", fmt.Sprintf("web-%d", i), "Normal", "Started", "Started container web", 1), int64(100+i)))
	}
	return b
}

func newSink(t *testing.T, cfg webhook.Config, opts webhook.Options) *webhook.Sink {
	t.Helper()
	s, err := webhook.New(cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return c
}

func TestRecordsFormatRoundTrips(t *testing.T) {
	r := webhooktest.New(t, webhooktest.Options{})
	s := newSink(t, webhook.Config{
		URL:         r.URL(),
		Headers:     map[string]string{"X-Tenant": "blue"},
		BearerToken: "s3cret",
	}, webhook.Options{})
	ev := event("uid-a", "default", "web-1", "Warning", "BackOff", "Back-off restarting failed container", 600)
	ev.Series = nil
	batch := []export.Record{
		record(watch.Added, ev, 7),
		record(watch.Modified, ev, 9),
		record(watch.Deleted, ev, 12),
	}
	if err := s.Send(ctx(t), batch); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if err := s.Send(ctx(t), batchOf(1)); err != nil {
		t.Fatalf("second Send: %v", err)
	}
	reqs := r.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	q := reqs[0]
	for h, want := range map[string]string{
		"Content-Type":    "application/json",
		"X-Tenant":        "blue",
		"Authorization":   "Bearer s3cret",
		"Idempotency-Key": "uid-a/7..uid-a/12",
		"User-Agent":      "kubevents-export",
	} {
		if got := q.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	if diff := cmp.Diff(batch, q.Records); diff != "" {
		t.Errorf("records received differ (-sent +received):\n%s", diff)
	}
	if got, want := reqs[1].Header.Get("Idempotency-Key"), "uid-0/100"; got != want {
		t.Errorf("one record's Idempotency-Key = %q, want %q", got, want)
	}
	if reqs[0].RemoteAddr != reqs[1].RemoteAddr {
		t.Errorf("second batch came over a new connection (%s, then %s): keep-alive not used", reqs[0].RemoteAddr, reqs[1].RemoteAddr)
	}
}

func TestEmptyBatchPostsNothing(t *testing.T) {
	r := webhooktest.New(t, webhooktest.Options{})
	s := newSink(t, webhook.Config{URL: r.URL()}, webhook.Options{})
	if err := s.Send(ctx(t), nil); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if n := len(r.Requests()); n != 0 {
		t.Errorf("%d requests for an empty batch", n)
	}
}

func TestBearerTokenFile(t *testing.T) {
	r := webhooktest.New(t, webhooktest.Options{})
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newSink(t, webhook.Config{URL: r.URL(), BearerTokenFile: file}, webhook.Options{})
	if err := s.Send(ctx(t), batchOf(1)); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got := r.Requests()[0].Header.Get("Authorization"); got != "Bearer from-file" {
		t.Errorf("Authorization = %q, want %q", got, "Bearer from-file")
	}

	_, err := webhook.New(webhook.Config{URL: r.URL(), BearerTokenFile: filepath.Join(t.TempDir(), "missing")}, webhook.Options{})
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("New with a missing token file: %v, want an error naming the file", err)
	}
}

func TestTLS(t *testing.T) {
	files, err := webhooktest.GenerateTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := webhooktest.New(t, webhooktest.Options{TLS: files.Server})
	if !strings.HasPrefix(r.URL(), "https://127.0.0.1:") {
		t.Fatalf("URL %s", r.URL())
	}

	t.Run("CA and client certificate", func(t *testing.T) {
		s := newSink(t, webhook.Config{URL: r.URL(), TLS: webhook.TLSConfig{
			CAFile: files.CAFile, CertFile: files.ClientCertFile, KeyFile: files.ClientKeyFile,
		}}, webhook.Options{})
		if err := s.Send(ctx(t), batchOf(2)); err != nil {
			t.Fatalf("Send: %v", err)
		}
		reqs := r.Requests()
		if got := reqs[len(reqs)-1].ClientCertCN; got != webhooktest.ClientCN {
			t.Errorf("client certificate CN %q, want %q", got, webhooktest.ClientCN)
		}
	})
	t.Run("server name", func(t *testing.T) {
		s := newSink(t, webhook.Config{URL: r.URL(), TLS: webhook.TLSConfig{CAFile: files.CAFile, ServerName: webhooktest.ServerName}}, webhook.Options{})
		if err := s.Send(ctx(t), batchOf(1)); err != nil {
			t.Fatalf("Send: %v", err)
		}
		s = newSink(t, webhook.Config{URL: r.URL(), TLS: webhook.TLSConfig{CAFile: files.CAFile, ServerName: "other.test"}}, webhook.Options{})
		if err := s.Send(ctx(t), batchOf(1)); err == nil || !strings.Contains(err.Error(), "other.test") {
			t.Errorf("Send to a server not named other.test: %v, want a certificate error", err)
		}
	})
	t.Run("unknown CA", func(t *testing.T) {
		s := newSink(t, webhook.Config{URL: r.URL()}, webhook.Options{})
		if err := s.Send(ctx(t), batchOf(1)); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("Send without the CA: %v, want a certificate error", err)
		}
	})
	t.Run("insecure", func(t *testing.T) {
		s := newSink(t, webhook.Config{URL: r.URL(), TLS: webhook.TLSConfig{InsecureSkipVerify: true}}, webhook.Options{})
		if err := s.Send(ctx(t), batchOf(1)); err != nil {
			t.Errorf("Send: %v", err)
		}
	})
	t.Run("mismatched key", func(t *testing.T) {
		_, err := webhook.New(webhook.Config{URL: r.URL(), TLS: webhook.TLSConfig{CertFile: files.ClientCertFile, KeyFile: files.CAFile}}, webhook.Options{})
		if err == nil || !strings.Contains(err.Error(), "keyFile") {
			t.Errorf("New with a certificate as key: %v, want an error", err)
		}
	})
	t.Run("missing CA file", func(t *testing.T) {
		_, err := webhook.New(webhook.Config{URL: r.URL(), TLS: webhook.TLSConfig{CAFile: filepath.Join(t.TempDir(), "nope.crt")}}, webhook.Options{})
		if err == nil || !strings.Contains(err.Error(), "nope.crt") {
			t.Errorf("New with a missing CA file: %v, want an error naming it", err)
		}
	})
}

func TestRetryableAnswers(t *testing.T) {
	r := webhooktest.New(t, webhooktest.Options{})
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	s := newSink(t, webhook.Config{URL: r.URL()}, webhook.Options{Clock: clk})
	cases := []struct {
		code       int
		retryAfter string
		want       time.Duration
	}{
		{http.StatusServiceUnavailable, "7", 7 * time.Second},
		{http.StatusTooManyRequests, clk.Now().Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second},
		{http.StatusRequestTimeout, "", 0},
		{http.StatusInternalServerError, "soon", 0},
		{http.StatusBadGateway, "-3", 0},
	}
	for _, c := range cases {
		r.FailNext(1, c.code, c.retryAfter)
		err := s.Send(ctx(t), batchOf(1))
		if err == nil {
			t.Errorf("%d: Send succeeded", c.code)
			continue
		}
		if errors.Is(err, export.ErrRejected) {
			t.Errorf("%d: %v is a rejection, want retryable", c.code, err)
		}
		if got := export.RetryAfter(err); got != c.want {
			t.Errorf("%d with Retry-After %q: RetryAfter %v, want %v", c.code, c.retryAfter, got, c.want)
		}
		var se *webhook.StatusError
		if !errors.As(err, &se) || se.Code != c.code {
			t.Errorf("%d: %v is no StatusError with the code", c.code, err)
		}
	}
	if err := s.Send(ctx(t), batchOf(1)); err != nil {
		t.Errorf("Send after the failures: %v", err)
	}
	if n := len(r.Records()); n != 1 {
		t.Errorf("%d records accepted, want 1", n)
	}
}

func TestRejectedAnswer(t *testing.T) {
	r := webhooktest.New(t, webhooktest.Options{})
	// The path of a Slack webhook URL is its secret: errors must not show it.
	s := newSink(t, webhook.Config{URL: r.URL() + "/T0/B0/SECRET"}, webhook.Options{})
	r.FailNext(1, http.StatusBadRequest, "")
	err := s.Send(ctx(t), batchOf(1))
	if !errors.Is(err, export.ErrRejected) {
		t.Fatalf("400: %v, want an error wrapping ErrRejected", err)
	}
	for _, want := range []string{"400 Bad Request", "failing as told with 400", "http://127.0.0.1:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("error %q shows the URL's path", err)
	}
	if export.RetryAfter(err) != 0 || export.RetryAfter(errors.New("x")) != 0 {
		t.Error("RetryAfter of errors without Retry-After is not 0")
	}

	r.Down()
	err = s.Send(ctx(t), batchOf(1))
	if err == nil || errors.Is(err, export.ErrRejected) || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("Send to a receiver that is down: %v, want a retryable error without the URL's path", err)
	}
}

func TestRedirectIsRejected(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, "/elsewhere", http.StatusFound)
	}))
	defer srv.Close()
	s := newSink(t, webhook.Config{URL: srv.URL}, webhook.Options{})
	err := s.Send(ctx(t), batchOf(1))
	if !errors.Is(err, export.ErrRejected) || !strings.Contains(err.Error(), "redirects are not followed") {
		t.Errorf("302: %v, want a rejection saying redirects are not followed", err)
	}
}

func TestReceiverDownThenUp(t *testing.T) {
	r := webhooktest.New(t, webhooktest.Options{})
	s := newSink(t, webhook.Config{URL: r.URL()}, webhook.Options{})
	if err := s.Send(ctx(t), batchOf(1)); err != nil {
		t.Fatalf("Send: %v", err)
	}
	r.Down()
	err := s.Send(ctx(t), batchOf(2))
	if err == nil || errors.Is(err, export.ErrRejected) {
		t.Fatalf("Send while down: %v, want a retryable error", err)
	}
	if !strings.Contains(err.Error(), "refused") {
		t.Errorf("Send while down: %v, want connection refused", err)
	}
	if err := r.Up(); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx(t), batchOf(2)); err != nil {
		t.Fatalf("Send after Up: %v", err)
	}
	if n := len(r.Records()); n != 3 {
		t.Errorf("%d records accepted, want 3", n)
	}
}

func TestContextCancelReturnsPromptly(t *testing.T) {
	r := webhooktest.New(t, webhooktest.Options{})
	s := newSink(t, webhook.Config{URL: r.URL(), Timeout: metav1.Duration{Duration: time.Hour}}, webhook.Options{})
	r.Stall()
	c, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Send(c, batchOf(1)) }()
	if err := r.WaitHeld(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Send after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Send did not return after its context was cancelled")
	}
	if err := s.Send(c, batchOf(1)); !errors.Is(err, context.Canceled) {
		t.Errorf("Send with a cancelled context: %v", err)
	}
}

func TestTimeout(t *testing.T) {
	r := webhooktest.New(t, webhooktest.Options{})
	s := newSink(t, webhook.Config{URL: r.URL(), Timeout: metav1.Duration{Duration: 100 * time.Millisecond}}, webhook.Options{})
	r.Stall()
	err := s.Send(ctx(t), batchOf(1))
	if err == nil || errors.Is(err, export.ErrRejected) || !strings.Contains(err.Error(), "no answer within the timeout of 100ms") {
		t.Errorf("Send to a stalled receiver: %v, want a retryable timeout", err)
	}
}

func TestSlackFormat(t *testing.T) {
	r := webhooktest.New(t, webhooktest.Options{})
	s := newSink(t, webhook.Config{URL: r.URL(), Format: webhook.FormatSlack}, webhook.Options{})
	backoff := event("uid-b", "default", "web-1", "Warning", "BackOff", "Back-off restarting\nfailed container", 600)
	node := event("uid-n", "", "node-1", "Normal", "NodeReady", "Node <node-1> status is now: NodeReady & fine", 1)
	node.InvolvedObject.Kind = "Node"
	batch := []export.Record{
		record(watch.Modified, backoff, 41),
		record(watch.Added, node, 42),
		record(watch.Deleted, backoff, 43),
	}
	if err := s.Send(ctx(t), batch); err != nil {
		t.Fatalf("Send: %v", err)
	}
	reqs := r.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	want := "Warning BackOff Pod default/web-1: Back-off restarting failed container (count 600) [uid-b/41]\n" +
		"Normal NodeReady Node node-1: Node &lt;node-1&gt; status is now: NodeReady &amp; fine [uid-n/42]\n" +
		"Warning BackOff Pod default/web-1: Back-off restarting failed container (count 600) (deleted) [uid-b/43]"
	if reqs[0].Text != want {
		t.Errorf("text:\n%s\nwant:\n%s", reqs[0].Text, want)
	}
	if got := reqs[0].Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q", got)
	}
	if got := reqs[0].Header.Get("Idempotency-Key"); got != "" {
		t.Errorf("slack format sent Idempotency-Key %q", got)
	}

	quiet := backoff.DeepCopy()
	quiet.Message = " "
	if got, want := webhook.SlackLine(record(watch.Added, quiet, 51)), "Warning BackOff Pod default/web-1 (count 600) [uid-b/51]"; got != want {
		t.Errorf("line without a message:\n%s\nwant\n%s", got, want)
	}

	ser := backoff.DeepCopy()
	ser.Count = 0
	ser.Series = &corev1.EventSeries{Count: 5}
	if got, want := webhook.SlackLine(record(watch.Added, ser, 50)), "Warning BackOff Pod default/web-1: Back-off restarting failed container (count 5) [uid-b/50]"; got != want {
		t.Errorf("line of a series:\n%s\nwant\n%s", got, want)
	}
}

func TestSlackSplitsLongBatches(t *testing.T) {
	r := webhooktest.New(t, webhooktest.Options{})
	const max = 300
	s := newSink(t, webhook.Config{URL: r.URL(), Format: webhook.FormatSlack, MaxTextBytes: max}, webhook.Options{})
	batch := batchOf(20)
	long := event("uid-long", "default", "big", "Warning", "Failed", strings.Repeat("é<", 400), 1)
	batch = append(batch, record(watch.Added, long, 500))
	if err := s.Send(ctx(t), batch); err != nil {
		t.Fatalf("Send: %v", err)
	}
	reqs := r.Requests()
	if len(reqs) < 2 {
		t.Fatalf("%d requests, want the batch split", len(reqs))
	}
	var lines []string
	for i, q := range reqs {
		if len(q.Text) > max {
			t.Errorf("message %d has %d bytes, more than %d", i, len(q.Text), max)
		}
		lines = append(lines, strings.Split(q.Text, "\n")...)
	}
	if len(lines) != len(batch) {
		t.Fatalf("%d lines, want %d", len(lines), len(batch))
	}
	for i, rec := range batch[:20] {
		if want := webhook.SlackLine(rec); lines[i] != want {
			t.Errorf("line %d = %q, want %q", i, lines[i], want)
		}
	}
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "Warning Failed Pod default/big: é&lt;") || !strings.HasSuffix(last, "… [uid-long/500]") {
		t.Errorf("long line not shortened with its key kept: %q", last)
	}

	// A failure mid-batch fails the batch; sent again, the parts before
	// the failure arrive twice.
	r.FailAfter(1, 1, http.StatusServiceUnavailable, "")
	n := len(r.Requests())
	err := s.Send(ctx(t), batch)
	if err == nil || errors.Is(err, export.ErrRejected) || !strings.Contains(err.Error(), fmt.Sprintf("message 2 of %d", len(reqs))) {
		t.Fatalf("Send failing at the second message: %v", err)
	}
	if got := len(r.Requests()) - n; got != 2 {
		t.Errorf("%d POSTs after a failure at the second, want 2", got)
	}
	if err := s.Send(ctx(t), batch); err != nil {
		t.Fatalf("Send again: %v", err)
	}
}

func TestValidate(t *testing.T) {
	ok := webhook.Config{URL: "https://hooks.example/x"}
	if errs := ok.Validate(field.NewPath("webhook")); len(errs) != 0 {
		t.Errorf("valid config: %v", errs)
	}
	cases := []struct {
		name  string
		cfg   webhook.Config
		field string
	}{
		{"no url", webhook.Config{}, "webhook.url"},
		{"ftp", webhook.Config{URL: "ftp://x/y"}, "webhook.url"},
		{"no host", webhook.Config{URL: "https:///y"}, "webhook.url"},
		{"tls over http", webhook.Config{URL: "http://x", TLS: webhook.TLSConfig{CAFile: "ca"}}, "webhook.tls"},
		{"bad header", webhook.Config{URL: "http://x", Headers: map[string]string{"a b": "c"}}, "webhook.headers[a b]"},
		{"header value", webhook.Config{URL: "http://x", Headers: map[string]string{"X-A": "a\nb"}}, "webhook.headers[X-A]"},
		{"reserved header", webhook.Config{URL: "http://x", Headers: map[string]string{"content-type": "text/plain"}}, "webhook.headers[content-type]"},
		{"authorization and token", webhook.Config{URL: "http://x", BearerToken: "t", Headers: map[string]string{"Authorization": "Basic x"}}, "webhook.headers[Authorization]"},
		{"two tokens", webhook.Config{URL: "http://x", BearerToken: "t", BearerTokenFile: "f"}, "webhook.bearerTokenFile"},
		{"cert without key", webhook.Config{URL: "https://x", TLS: webhook.TLSConfig{CertFile: "c"}}, "webhook.tls.keyFile"},
		{"insecure with CA", webhook.Config{URL: "https://x", TLS: webhook.TLSConfig{CAFile: "c", InsecureSkipVerify: true}}, "webhook.tls.insecureSkipVerify"},
		{"negative timeout", webhook.Config{URL: "https://x", Timeout: metav1.Duration{Duration: -time.Second}}, "webhook.timeout"},
		{"format", webhook.Config{URL: "https://x", Format: "xml"}, "webhook.format"},
		{"maxTextBytes for records", webhook.Config{URL: "https://x", MaxTextBytes: 1000}, "webhook.maxTextBytes"},
		{"tiny maxTextBytes", webhook.Config{URL: "https://x", Format: "slack", MaxTextBytes: 10}, "webhook.maxTextBytes"},
	}
	for _, c := range cases {
		errs := c.cfg.Validate(field.NewPath("webhook"))
		if len(errs) != 1 || errs[0].Field != c.field {
			t.Errorf("%s: %v, want one error at %s", c.name, errs, c.field)
		}
		if _, err := webhook.New(c.cfg, webhook.Options{}); err == nil {
			t.Errorf("%s: New accepted the config", c.name)
		}
	}
}

func TestConfigFromYAML(t *testing.T) {
	const doc = `
url: https://hooks.slack.com/services/T0/B0/X
format: slack
timeout: 5s
maxTextBytes: 4000
headers:
  X-Team: infra
bearerTokenFile: /var/run/secrets/token
tls:
  caFile: /etc/ca.crt
  serverName: hooks.internal
`
	var cfg webhook.Config
	if err := yaml.UnmarshalStrict([]byte(doc), &cfg); err != nil {
		t.Fatal(err)
	}
	want := webhook.Config{
		URL:             "https://hooks.slack.com/services/T0/B0/X",
		Format:          webhook.FormatSlack,
		Timeout:         metav1.Duration{Duration: 5 * time.Second},
		MaxTextBytes:    4000,
		Headers:         map[string]string{"X-Team": "infra"},
		BearerTokenFile: "/var/run/secrets/token",
		TLS:             webhook.TLSConfig{CAFile: "/etc/ca.crt", ServerName: "hooks.internal"},
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if errs := cfg.Validate(nil); len(errs) != 0 {
		t.Errorf("Validate: %v", errs)
	}
}

func TestCloseReleasesConnections(t *testing.T) {
	r := webhooktest.New(t, webhooktest.Options{})
	s, err := webhook.New(webhook.Config{URL: r.URL()}, webhook.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx(t), batchOf(1)); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if err := r.WaitConns(ctx(t), 1); err != nil {
		t.Fatalf("the kept-alive connection: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitConns(ctx(t), 0); err != nil {
		t.Errorf("after Close: %v", err)
	}
}

func TestReceiverKeysOnly(t *testing.T) {
	r := webhooktest.New(t, webhooktest.Options{KeysOnly: true})
	s := newSink(t, webhook.Config{URL: r.URL()}, webhook.Options{})
	batch := batchOf(3)
	if err := s.Send(ctx(t), batch); err != nil {
		t.Fatalf("Send: %v", err)
	}
	got, err := r.WaitRecords(ctx(t), 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range got {
		if rec.Key != batch[i].Key || rec.Revision != batch[i].Revision || rec.Type != batch[i].Type || rec.Event != nil {
			t.Errorf("record %d = %+v, want the key, revision and type of %s only", i, rec, batch[i].Key)
		}
	}
	if q := r.Requests()[0]; q.Body != nil {
		t.Errorf("body kept: %d bytes", len(q.Body))
	}
}

// TestRecordsCarryTheCluster: a fleet cluster's record carries
// "cluster":"east" in the POSTed JSON and in a Slack line; a root
// cluster's record has no cluster field at all, as before fleets.
func TestRecordsCarryTheCluster(t *testing.T) {
	r := webhooktest.New(t, webhooktest.Options{})
	s := newSink(t, webhook.Config{URL: r.URL()}, webhook.Options{})
	root := record(watch.Added, event("uid-r", "shop", "web-1", "Warning", "BackOff", "m", 1), 7)
	east := record(watch.Added, event("uid-e", "shop", "web-1", "Warning", "BackOff", "m", 1), 8)
	east.Cluster = "east"
	if err := s.Send(ctx(t), []export.Record{root, east}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	reqs := r.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(reqs[0].Body, &raw); err != nil {
		t.Fatalf("body %s: %v", reqs[0].Body, err)
	}
	if len(raw) != 2 {
		t.Fatalf("%d records in %s", len(raw), reqs[0].Body)
	}
	if c, ok := raw[0]["cluster"]; ok {
		t.Errorf("the root cluster's record has a cluster field %s", c)
	}
	if got := string(raw[1]["cluster"]); got != `"east"` {
		t.Errorf("east's record has cluster %s, want \"east\"", got)
	}
	if got := reqs[0].Records; len(got) != 2 || got[0].Cluster != "" || got[1].Cluster != "east" || got[1].Event.Namespace != "shop" {
		t.Errorf("records read back: %+v", got)
	}
	if got, want := webhook.SlackLine(east), "[east] Warning BackOff Pod shop/web-1: m [uid-e/8]"; got != want {
		t.Errorf("east's Slack line %q, want %q", got, want)
	}
	if got, want := webhook.SlackLine(root), "Warning BackOff Pod shop/web-1: m [uid-r/7]"; got != want {
		t.Errorf("root's Slack line %q, want %q", got, want)
	}
}
