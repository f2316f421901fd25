package server_test

import (
	"context"
	"fmt"
	"github.com/kubevents/kubevents/internal/metricstest"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/admission/eventratelimit"
	"github.com/kubevents/kubevents/internal/syncbuf"
	"github.com/kubevents/kubevents/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// rateEnv is an env whose server applies limits, with its metrics registry.
type rateEnv struct {
	*env
	reg *prometheus.Registry
}

func newRateEnv(t *testing.T, auth authenticator.Request, limits ...eventratelimit.Limit) *rateEnv {
	t.Helper()
	reg := prometheus.NewRegistry()
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		l, err := eventratelimit.New(&eventratelimit.Configuration{Limits: limits}, eventratelimit.Options{Clock: c.Clock})
		if err != nil {
			t.Fatal(err)
		}
		c.EventRateLimit, c.Registry, c.Authenticator = l, reg, auth
	})
	return &rateEnv{env: e, reg: reg}
}

// clientAs is a clientset for e with a bearer token ("" for none).
func (e *rateEnv) clientAs(token string) kubernetes.Interface {
	e.t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: e.url, QPS: -1, BearerToken: token})
	if err != nil {
		e.t.Fatal(err)
	}
	return cs
}

// rateEvent describes one write: its group, namespace, object, reason and
// reporter.
type rateEvent struct {
	eventsV1             bool
	ns, object, reason   string
	controller, instance string
	dryRun               bool
}

func (r rateEvent) withDefaults() rateEvent {
	if r.ns == "" {
		r.ns = "default"
	}
	if r.object == "" {
		r.object = "web"
	}
	if r.reason == "" {
		r.reason = "Started"
	}
	if r.controller == "" {
		r.controller = "kubelet"
	}
	if r.instance == "" {
		r.instance = "node-1"
	}
	return r
}

// post creates the event r describes through client-go, once: client-go's
// own retry of a 429 with Retry-After is turned off, so the refusal is seen.
func (e *rateEnv) post(cs kubernetes.Interface, r rateEvent) error {
	r = r.withDefaults()
	now := e.clock.Now()
	ref := corev1.ObjectReference{Kind: "Pod", Namespace: r.ns, Name: r.object, UID: types.UID("uid-" + r.object), APIVersion: "v1"}
	var (
		rc  rest.Interface
		obj runtime.Object
	)
	if r.eventsV1 {
		rc = cs.EventsV1().RESTClient()
		obj = &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{GenerateName: r.object + "-"}, EventTime: metav1.NewMicroTime(now),
			ReportingController: r.controller, ReportingInstance: r.instance, Action: "Start", Reason: r.reason,
			Regarding: ref, Note: "started", Type: corev1.EventTypeNormal,
		}
	} else {
		rc = cs.CoreV1().RESTClient()
		obj = &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{GenerateName: r.object + "-"}, InvolvedObject: ref, Reason: r.reason,
			Message: "started", Type: corev1.EventTypeNormal, Count: 1, Source: corev1.EventSource{Component: r.controller, Host: r.instance},
			FirstTimestamp: metav1.NewTime(now), LastTimestamp: metav1.NewTime(now),
		}
	}
	req := rc.Post().Namespace(r.ns).Resource("events").Body(obj).MaxRetries(0)
	if r.dryRun {
		req = req.Param("dryRun", metav1.DryRunAll)
	}
	return req.Do(e.ctx).Error()
}

// wantRefused checks that err is a 429 TooManyRequests naming limit and
// key, with details.retryAfterSeconds 1.
func wantRefused(t *testing.T, err error, limit eventratelimit.LimitType, key string) {
	t.Helper()
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("got %v, want 429 TooManyRequests", err)
	}
	if want := fmt.Sprintf("limit reached on type %s for key %s", limit, key); !strings.Contains(err.Error(), want) {
		t.Errorf("message %q does not say %q", err.Error(), want)
	}
	if s, ok := apierrors.SuggestsClientDelay(err); !ok || s != 1 {
		t.Errorf("details.retryAfterSeconds %d (%v), want 1", s, ok)
	}
}

func wantRefusals(t *testing.T, reg *prometheus.Registry, counts map[eventratelimit.LimitType]int) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# HELP eventsd_event_rate_limit_refusals_total Event writes refused with 429 by the event rate limits, by limit type (Server, Namespace, User, SourceAndObject); a write several limits refuse counts for each.\n# TYPE eventsd_event_rate_limit_refusals_total counter\n")
	for _, typ := range []eventratelimit.LimitType{"Namespace", "Server", "SourceAndObject", "User"} {
		if n, ok := counts[typ]; ok {
			fmt.Fprintf(&b, "eventsd_event_rate_limit_refusals_total{type=%q} %d\n", typ, n)
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(b.String()), "eventsd_event_rate_limit_refusals_total"); err != nil {
		t.Error(err)
	}
}

// TestRateLimitEachType: for every limit type, writes of both API groups
// share its buckets; beyond the burst client-go gets 429 TooManyRequests
// naming the limit and its key, with details.retryAfterSeconds; another
// bucket is not affected; once the bucket refills writes pass; refusals are
// counted by type.
func TestRateLimitEachType(t *testing.T) {
	auth, err := server.ParseTokens(strings.NewReader("tok-alice,alice,1\ntok-bob,bob,2\n"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		typ        eventratelimit.LimitType
		token      string
		same, diff rateEvent // diff is in another bucket, unless typ is Server
		key        string
	}{
		{eventratelimit.ServerLimitType, "", rateEvent{}, rateEvent{}, ""},
		{eventratelimit.NamespaceLimitType, "", rateEvent{ns: "default"}, rateEvent{ns: "other"}, "default"},
		{eventratelimit.UserLimitType, "tok-alice", rateEvent{}, rateEvent{}, "alice"},
		{eventratelimit.SourceAndObjectLimitType, "", rateEvent{object: "web"}, rateEvent{object: "db"}, "kubelet/node-1 Pod default/web (uid-web)"},
	}
	for _, c := range cases {
		t.Run(string(c.typ), func(t *testing.T) {
			var a authenticator.Request
			if c.token != "" {
				a = bearertoken.New(auth)
			}
			e := newRateEnv(t, a, eventratelimit.Limit{Type: c.typ, QPS: 1, Burst: 2})
			cs := e.clientAs(c.token)
			core, v1 := c.same, c.same
			v1.eventsV1 = true
			if err := e.post(cs, core); err != nil {
				t.Fatal(err)
			}
			if err := e.post(cs, v1); err != nil {
				t.Fatal(err)
			}
			wantRefused(t, e.post(cs, core), c.typ, c.key)
			wantRefused(t, e.post(cs, v1), c.typ, c.key)
			other := cs
			if c.typ == eventratelimit.UserLimitType {
				other = e.clientAs("tok-bob")
			}
			if c.typ != eventratelimit.ServerLimitType {
				if err := e.post(other, c.diff); err != nil {
					t.Fatalf("another bucket was limited: %v", err)
				}
			}
			e.clock.Step(time.Second)
			if err := e.post(cs, v1); err != nil {
				t.Fatalf("refused after the bucket refilled: %v", err)
			}
			wantRefusals(t, e.reg, map[eventratelimit.LimitType]int{c.typ: 2})
		})
	}
}

// TestRateLimitAnonymousUser: without authentication, the User limit keys
// on kube-apiserver's anonymous user.
func TestRateLimitAnonymousUser(t *testing.T) {
	e := newRateEnv(t, nil, eventratelimit.Limit{Type: eventratelimit.UserLimitType, QPS: 1, Burst: 1})
	if err := e.post(e.cs, rateEvent{}); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, e.post(e.cs, rateEvent{}), eventratelimit.UserLimitType, "system:anonymous")
}

// TestRateLimitRetryAfterHeader: the 429 carries a Retry-After header
// computed from the bucket that refused (qps 1: one second), and leaves
// nothing stored.
func TestRateLimitRetryAfterHeader(t *testing.T) {
	e := newRateEnv(t, nil, eventratelimit.Limit{Type: eventratelimit.NamespaceLimitType, QPS: 1, Burst: 1})
	body := `{"apiVersion":"v1","kind":"Event","metadata":{"name":"%s"},"involvedObject":{"kind":"Pod","name":"web","namespace":"default"},"reason":"Started","message":"m","type":"Normal"}`
	if code, b := e.do(http.MethodPost, "/api/v1/namespaces/default/events", "application/json", "", fmt.Sprintf(body, "a")); code != http.StatusCreated {
		t.Fatalf("first create: %d %s", code, b)
	}
	req, _ := http.NewRequestWithContext(e.ctx, http.MethodPost, e.url+"/api/v1/namespaces/default/events", strings.NewReader(fmt.Sprintf(body, "b")))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("second create: %d, Retry-After %q; want 429 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if _, err := e.cs.CoreV1().Events("default").Get(e.ctx, "b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused event was stored: %v", err)
	}
}

// TestRateLimitWritesCountDryRunsDoNot: creates, PATCHes and PUTs take
// tokens, as upstream's Create and Update operations; dry runs do not; a
// refused update changes nothing.
func TestRateLimitWritesCountDryRunsDoNot(t *testing.T) {
	e := newRateEnv(t, nil, eventratelimit.Limit{Type: eventratelimit.NamespaceLimitType, QPS: 1, Burst: 3})
	ev := e.create("a") // 1
	events := e.cs.CoreV1().Events("default")
	for range 5 {
		if err := e.post(e.cs, rateEvent{dryRun: true}); err != nil {
			t.Fatalf("dry-run create: %v", err)
		}
		if _, err := events.Patch(e.ctx, "a", types.MergePatchType, []byte(`{"count":9}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("dry-run patch: %v", err)
		}
	}
	patch := func() error {
		return e.cs.CoreV1().RESTClient().Patch(types.MergePatchType).Namespace("default").Resource("events").Name("a").
			Body([]byte(`{"count":2}`)).MaxRetries(0).Do(e.ctx).Error()
	}
	put := func() error {
		ev.Count = 3
		return e.cs.CoreV1().RESTClient().Put().Namespace("default").Resource("events").Name("a").Body(ev).MaxRetries(0).Do(e.ctx).Error()
	}
	if err := patch(); err != nil { // 2
		t.Fatal(err)
	}
	ev.ResourceVersion = ""
	if err := put(); err != nil { // 3
		t.Fatal(err)
	}
	wantRefused(t, patch(), eventratelimit.NamespaceLimitType, "default")
	wantRefused(t, put(), eventratelimit.NamespaceLimitType, "default")
	got, err := events.Get(e.ctx, "a", metav1.GetOptions{})
	if err != nil || got.Count != 3 {
		t.Fatalf("after refused updates: %v, count %d, want 3", err, got.Count)
	}
}

// TestRateLimitNovelty: when only the SourceAndObject limit is reached, the
// first event for an (object, reason) with none stored is still admitted,
// in either group, and counted; a repeat is not; the Namespace limit still
// bounds novel events.
func TestRateLimitNovelty(t *testing.T) {
	e := newRateEnv(t, nil,
		eventratelimit.Limit{Type: eventratelimit.NamespaceLimitType, QPS: 1, Burst: 4},
		eventratelimit.Limit{Type: eventratelimit.SourceAndObjectLimitType, QPS: 1, Burst: 1})
	key := "kubelet/node-1 Pod default/web (uid-web)"
	if err := e.post(e.cs, rateEvent{reason: "Started"}); err != nil { // namespace 1
		t.Fatal(err)
	}
	wantRefused(t, e.post(e.cs, rateEvent{reason: "Started"}), eventratelimit.SourceAndObjectLimitType, key)
	if err := e.post(e.cs, rateEvent{reason: "Killing"}); err != nil { // namespace 2
		t.Fatalf("the first Killing event was refused: %v", err)
	}
	wantRefused(t, e.post(e.cs, rateEvent{reason: "Killing", eventsV1: true}), eventratelimit.SourceAndObjectLimitType, key)
	if err := e.post(e.cs, rateEvent{reason: "BackOff", eventsV1: true}); err != nil { // namespace 3
		t.Fatalf("the first BackOff event (events.k8s.io/v1) was refused: %v", err)
	}
	if err := e.post(e.cs, rateEvent{reason: "Pulled", object: "db"}); err != nil { // namespace 4
		t.Fatal(err)
	}
	err := e.post(e.cs, rateEvent{reason: "Unhealthy"})
	wantRefused(t, err, eventratelimit.NamespaceLimitType, "default")
	if !strings.Contains(err.Error(), "limit reached on type SourceAndObject") {
		t.Errorf("%v does not name the SourceAndObject limit too", err)
	}
	if n := metricstest.Sum(t, e.reg, "eventsd_event_rate_limit_novel_admissions_total"); n != 2 {
		t.Errorf("novel admissions %v, want 2", n)
	}
	wantRefusals(t, e.reg, map[eventratelimit.LimitType]int{eventratelimit.SourceAndObjectLimitType: 3, eventratelimit.NamespaceLimitType: 1})
}

// TestRateLimitClientGoHonoursRetryAfter: client-go's typed client, given
// the 429 with Retry-After, waits and retries by itself; the retry passes
// once the bucket has refilled.
func TestRateLimitClientGoHonoursRetryAfter(t *testing.T) {
	e := newRateEnv(t, nil, eventratelimit.Limit{Type: eventratelimit.ServerLimitType, QPS: 1, Burst: 1})
	e.create("a")
	done := make(chan error, 1)
	go func() {
		_, err := e.cs.CoreV1().Events("default").Create(context.Background(), &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "b"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"},
			Reason:         "Started", Message: "started", Type: corev1.EventTypeNormal,
		}, metav1.CreateOptions{})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for metricstest.Sum(t, e.reg, "eventsd_event_rate_limit_refusals_total") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second create was not refused")
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.clock.Step(time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("client-go's retry failed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("client-go did not retry")
	}
}

// TestRateLimitRefusalsLogged: refusals are logged with what was refused
// and why, at most once per 10 s with the number of refusals since the last
// line.
func TestRateLimitRefusalsLogged(t *testing.T) {
	var logs syncbuf.Buffer
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		l, err := eventratelimit.New(&eventratelimit.Configuration{Limits: []eventratelimit.Limit{
			{Type: eventratelimit.NamespaceLimitType, QPS: 1, Burst: 1}}}, eventratelimit.Options{Clock: c.Clock})
		if err != nil {
			t.Fatal(err)
		}
		c.EventRateLimit, c.Logger = l, slog.New(slog.NewTextHandler(&logs, nil))
	})
	re := &rateEnv{env: e}
	if err := re.post(e.cs, rateEvent{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		wantRefused(t, re.post(e.cs, rateEvent{}), eventratelimit.NamespaceLimitType, "default")
	}
	lines := func() []string {
		var out []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "rate limit reached") {
				out = append(out, l)
			}
		}
		return out
	}
	got := lines()
	if len(got) != 1 || !strings.Contains(got[0], `reason="limit reached on type Namespace for key default"`) ||
		!strings.Contains(got[0], "namespace=default") || !strings.Contains(got[0], "user=system:anonymous") {
		t.Fatalf("log lines %q, want one naming the limit, namespace and user", got)
	}
	e.clock.Step(10 * time.Second)
	if err := re.post(e.cs, rateEvent{}); err != nil { // refilled
		t.Fatal(err)
	}
	wantRefused(t, re.post(e.cs, rateEvent{}), eventratelimit.NamespaceLimitType, "default")
	if got := lines(); len(got) != 2 || !strings.Contains(got[1], "similarSinceLastLog=2") {
		t.Fatalf("log lines %q, want a second one counting the 2 refusals not logged", got)
	}
}

// TestRateLimitNoveltyNeedsAnObject: an event naming no object (neither
// uid nor name) is never novel: no index narrows the lookup.
func TestRateLimitNoveltyNeedsAnObject(t *testing.T) {
	e := newRateEnv(t, nil, eventratelimit.Limit{Type: eventratelimit.SourceAndObjectLimitType, QPS: 1, Burst: 1})
	post := func(reason string) error {
		ev := &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "x-"}, InvolvedObject: corev1.ObjectReference{Namespace: "default"},
			Reason: reason, Message: "m", Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "c"},
		}
		return e.cs.CoreV1().RESTClient().Post().Namespace("default").Resource("events").Body(ev).MaxRetries(0).Do(e.ctx).Error()
	}
	if err := post("A"); err != nil {
		t.Fatal(err)
	}
	if err := post("B"); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("got %v, want 429", err)
	}
	if n := metricstest.Sum(t, e.reg, "eventsd_event_rate_limit_novel_admissions_total"); n != 0 {
		t.Errorf("novel admissions %v, want 0", n)
	}
}
