package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// cgTimeout bounds every single wait in these tests.
const cgTimeout = 10 * time.Second

// cgCtx is a context for one test, bounded so a hung server fails the test
// instead of the whole binary.
func cgCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// cgCoreEvent is an old-style event as tools/record builds it.
func cgCoreEvent(ns, name, pod string) *corev1.Event {
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod, APIVersion: "v1",
			UID: types.UID("uid-" + pod), FieldPath: "spec.containers{app}"},
		Reason:         "Started",
		Message:        "message of " + name,
		Source:         corev1.EventSource{Component: "kubelet", Host: "node1"},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
		Type:           corev1.EventTypeNormal,
	}
}

// cgNewEvent is a new-style event as tools/events builds it.
func cgNewEvent(ns, name, pod string) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: name},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "test-ctrl",
		ReportingInstance:   "test-ctrl-host1",
		Action:              "Start",
		Reason:              "Started",
		Regarding:           corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod, APIVersion: "v1", UID: types.UID("uid-" + pod)},
		Note:                "note of " + name,
		Type:                corev1.EventTypeNormal,
	}
}

func cgCreateCore(t *testing.T, cs kubernetes.Interface, ev *corev1.Event) *corev1.Event {
	t.Helper()
	out, err := cs.CoreV1().Events(ev.Namespace).Create(cgCtx(t), ev, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create core event %s/%s: %v", ev.Namespace, ev.Name, err)
	}
	return out
}

func cgCreateNew(t *testing.T, cs kubernetes.Interface, ev *eventsv1.Event) *eventsv1.Event {
	t.Helper()
	out, err := cs.EventsV1().Events(ev.Namespace).Create(cgCtx(t), ev, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create events.k8s.io event %s/%s: %v", ev.Namespace, ev.Name, err)
	}
	return out
}

// cgDo runs a request and returns its HTTP status, body and error.
func cgDo(ctx context.Context, req *rest.Request) (int, []byte, error) {
	var code int
	res := req.Do(ctx).StatusCode(&code)
	body, _ := res.Raw()
	// Error, unlike Raw, decodes a Status body into the error.
	return code, body, res.Error()
}

// cgDeleteJSON deletes an event through a plain RESTClient with a JSON
// DeleteOptions body (the generated typed clients send protobuf).
func cgDeleteJSON(ctx context.Context, cs kubernetes.Interface, ns, name string, opts metav1.DeleteOptions) error {
	body, err := json.Marshal(opts)
	if err != nil {
		return err
	}
	_, _, err = cgDo(ctx, cs.CoreV1().RESTClient().Delete().Namespace(ns).Resource("events").Name(name).
		SetHeader("Content-Type", "application/json").Body(body))
	return err
}

// cgAPIStatus returns the Status of an API error, failing the test if err
// is not one with the given code and reason.
func cgAPIStatus(t *testing.T, err error, code int32, reason metav1.StatusReason) metav1.Status {
	t.Helper()
	if err == nil {
		t.Fatalf("expected a %d %s error, got success", code, reason)
	}
	se, ok := err.(apierrors.APIStatus)
	if !ok {
		t.Fatalf("expected an API status error %d %s, got %T: %v", code, reason, err, err)
	}
	st := se.Status()
	if st.Code != code || st.Reason != reason || st.Status != metav1.StatusFailure {
		t.Fatalf("expected %d %s, got code=%d reason=%q status=%q message=%q", code, reason, st.Code, st.Reason, st.Status, st.Message)
	}
	return st
}

func cgRV(t *testing.T, rv string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q is not an integer: %v", rv, err)
	}
	return n
}

// cgNext returns the next watch event, failing after cgTimeout.
func cgNext(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed unexpectedly")
		}
		return e
	case <-time.After(cgTimeout):
		t.Fatal("no watch event within the timeout")
	}
	return watch.Event{}
}

// cgNextCore expects the next watch event to be typ for the core event ns/name.
func cgNextCore(t *testing.T, w watch.Interface, typ watch.EventType, name string) *corev1.Event {
	t.Helper()
	e := cgNext(t, w)
	ev, ok := e.Object.(*corev1.Event)
	if !ok {
		t.Fatalf("watch event %s carries %T, want *v1.Event (%+v)", e.Type, e.Object, e.Object)
	}
	if e.Type != typ || ev.Name != name {
		t.Fatalf("watch event: got %s %s/%s (rv %s), want %s %s", e.Type, ev.Namespace, ev.Name, ev.ResourceVersion, typ, name)
	}
	return ev
}

// cgWatch checks a Watch call's result and stops the watch when the test
// ends: cgWatch(t)(client.Watch(ctx, opts)).
func cgWatch(t *testing.T) func(watch.Interface, error) watch.Interface {
	t.Helper()
	return func(w watch.Interface, err error) watch.Interface {
		t.Helper()
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		t.Cleanup(w.Stop)
		return w
	}
}

// cgPoll calls f until it returns true or the deadline passes.
func cgPoll(t *testing.T, timeout time.Duration, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, state := f()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last state: %s", timeout, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func cgCoreNames(items []corev1.Event) []string {
	out := make([]string, len(items))
	for i, ev := range items {
		out[i] = ev.Namespace + "/" + ev.Name
	}
	return out
}

func cgNewNames(items []eventsv1.Event) []string {
	out := make([]string, len(items))
	for i, ev := range items {
		out[i] = ev.Namespace + "/" + ev.Name
	}
	return out
}

// cgAllPages follows a paginated list from opts to its last page, at most
// maxPages+1 pages, and returns the names of every page in order.
func cgAllPages(t *testing.T, maxPages int, opts metav1.ListOptions, list func(metav1.ListOptions) (names []string, cont string, err error)) []string {
	t.Helper()
	var got []string
	for page := 0; ; page++ {
		if page > maxPages {
			t.Fatal("pagination does not end")
		}
		names, cont, err := list(opts)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		got = append(got, names...)
		if cont == "" {
			return got
		}
		opts.Continue = cont
	}
}

func cgEqualNames(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

// cgRawJSON GETs path and decodes the body as a JSON object.
func cgRawJSON(t *testing.T, cs kubernetes.Interface, path string) map[string]any {
	t.Helper()
	body, err := cs.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(cgCtx(t))
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("GET %s: body is not a JSON object: %v\n%s", path, err, body)
	}
	return m
}

// cgJSONNull checks that key is present with a null value.
func cgJSONNull(t *testing.T, m map[string]any, key string) {
	t.Helper()
	v, ok := m[key]
	if !ok {
		t.Errorf("JSON: %q missing, want null", key)
	} else if v != nil {
		t.Errorf("JSON: %q = %#v, want null", key, v)
	}
}

func cgJSONEmptyObject(t *testing.T, m map[string]any, key string) {
	t.Helper()
	v, ok := m[key].(map[string]any)
	if !ok || len(v) != 0 {
		t.Errorf("JSON: %q = %#v (present %v), want {}", key, m[key], ok)
	}
}

func cgJSONString(t *testing.T, m map[string]any, key, want string) {
	t.Helper()
	v, ok := m[key]
	if !ok {
		t.Errorf("JSON: %q missing, want %q", key, want)
	} else if s, _ := v.(string); s != want || v == nil {
		t.Errorf("JSON: %q = %#v, want %q", key, v, want)
	}
}

func cgJSONAbsent(t *testing.T, m map[string]any, key string) {
	t.Helper()
	if v, ok := m[key]; ok {
		t.Errorf("JSON: %q = %#v, want it absent", key, v)
	}
}

// cgRawWatch opens a watch with net/http, Accept application/json, and
// returns its first n frames decoded.
func cgRawWatch(t *testing.T, rawURL string, n int) []map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(cgCtx(t), "GET", rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("watch %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("watch %s: %d %s", rawURL, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	dec := json.NewDecoder(resp.Body)
	var out []map[string]any
	for len(out) < n {
		var f map[string]any
		if err := dec.Decode(&f); err != nil {
			t.Fatalf("watch %s: frame %d: %v", rawURL, len(out), err)
		}
		out = append(out, f)
	}
	return out
}

var cgMicroTimeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

func cgMicro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func TestClientCreateGet(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	ctx := cgCtx(t)
	const ns = "create"

	t.Run("core create is 201 and echoes server fields", func(t *testing.T) {
		ev := cgCoreEvent(ns, "c1.17f3a0000000001", "pod-a")
		body, _ := json.Marshal(ev)
		code, raw, err := cgDo(ctx, cs.CoreV1().RESTClient().Post().Namespace(ns).Resource("events").
			SetHeader("Content-Type", "application/json").Body(body))
		if err != nil || code != 201 {
			t.Fatalf("POST: code %d err %v body %s", code, err, raw)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		md, _ := m["metadata"].(map[string]any)
		for _, k := range []string{"uid", "resourceVersion", "creationTimestamp"} {
			if s, _ := md[k].(string); s == "" {
				t.Errorf("created object lacks metadata.%s: %v", k, md)
			}
		}
		cgJSONString(t, m, "kind", "Event")
		cgJSONString(t, m, "apiVersion", "v1")
		cgJSONNull(t, m, "eventTime")
		cgJSONString(t, m, "reportingComponent", "")
		cgJSONString(t, m, "reportingInstance", "")

		got, err := cs.CoreV1().Events(ns).Get(ctx, ev.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Message != ev.Message || got.Reason != ev.Reason || got.Count != 1 || got.Source != ev.Source ||
			got.InvolvedObject != ev.InvolvedObject || !got.FirstTimestamp.Equal(&ev.FirstTimestamp) ||
			!got.LastTimestamp.Equal(&ev.LastTimestamp) || got.Type != ev.Type || !got.EventTime.IsZero() {
			t.Errorf("GET returned %+v, want the created %+v", got, ev)
		}
		if string(got.UID) != md["uid"] || got.ResourceVersion != md["resourceVersion"] {
			t.Errorf("GET uid/rv %s/%s differ from create's %v/%v", got.UID, got.ResourceVersion, md["uid"], md["resourceVersion"])
		}
	})

	t.Run("uid and creationTimestamp are set by the server", func(t *testing.T) {
		ev := cgCoreEvent(ns, "sysfields", "pod-a")
		ev.UID = "client-chosen-uid"
		ev.CreationTimestamp = metav1.NewTime(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
		out := cgCreateCore(t, cs, ev)
		if out.UID == "" || out.UID == ev.UID || out.CreationTimestamp.Year() == 2001 || out.CreationTimestamp.IsZero() {
			t.Errorf("created uid %q creationTimestamp %v; the server must set both", out.UID, out.CreationTimestamp)
		}
	})

	t.Run("duplicate name is 409 AlreadyExists", func(t *testing.T) {
		ev := cgCoreEvent(ns, "dup", "pod-a")
		cgCreateCore(t, cs, ev)
		_, err := cs.CoreV1().Events(ns).Create(ctx, cgCoreEvent(ns, "dup", "pod-b"), metav1.CreateOptions{})
		st := cgAPIStatus(t, err, 409, metav1.StatusReasonAlreadyExists)
		if st.Message != `events "dup" already exists` {
			t.Errorf("message %q", st.Message)
		}
		got, err := cs.CoreV1().Events(ns).Get(ctx, "dup", metav1.GetOptions{})
		if err != nil || got.InvolvedObject.Name != "pod-a" {
			t.Errorf("the original was overwritten: %+v %v", got, err)
		}
	})

	t.Run("generateName", func(t *testing.T) {
		nameRE := regexp.MustCompile(`^gen-[a-z0-9]{5}$`)
		seen := map[string]bool{}
		for i := 0; i < 5; i++ {
			ev := cgCoreEvent(ns, "", "pod-g")
			ev.GenerateName = "gen-"
			out := cgCreateCore(t, cs, ev)
			if !nameRE.MatchString(out.Name) || out.GenerateName != "gen-" {
				t.Errorf("generated name %q (generateName %q), want gen- plus 5 characters", out.Name, out.GenerateName)
			}
			if seen[out.Name] {
				t.Errorf("generated name %q twice", out.Name)
			}
			seen[out.Name] = true
			if _, err := cs.CoreV1().Events(ns).Get(ctx, out.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("GET generated %s: %v", out.Name, err)
			}
		}
		long := strings.Repeat("a", 70)
		ev := cgCoreEvent(ns, "", "pod-g")
		ev.GenerateName = long
		out := cgCreateCore(t, cs, ev)
		if len(out.Name) != 63 || !strings.HasPrefix(out.Name, long[:58]) {
			t.Errorf("long generateName gave %q (len %d), want 58 characters of base plus 5", out.Name, len(out.Name))
		}
		nev := cgNewEvent(ns, "", "pod-g")
		nev.GenerateName = "newgen-"
		nout := cgCreateNew(t, cs, nev)
		if !regexp.MustCompile(`^newgen-[a-z0-9]{5}$`).MatchString(nout.Name) {
			t.Errorf("events.k8s.io generated name %q", nout.Name)
		}
	})

	t.Run("dryRun=All is 201 and stores nothing", func(t *testing.T) {
		ev := cgCoreEvent(ns, "dry", "pod-d")
		body, _ := json.Marshal(ev)
		code, raw, err := cgDo(ctx, cs.CoreV1().RESTClient().Post().Namespace(ns).Resource("events").Param("dryRun", "All").
			SetHeader("Content-Type", "application/json").Body(body))
		if err != nil || code != 201 {
			t.Fatalf("dry-run POST: code %d err %v body %s", code, err, raw)
		}
		var echoed corev1.Event
		if err := json.Unmarshal(raw, &echoed); err != nil || echoed.Name != "dry" || echoed.Message != ev.Message {
			t.Errorf("dry-run body %s (err %v)", raw, err)
		}
		out, err := cs.EventsV1().Events(ns).Create(ctx, cgNewEvent(ns, "dry-new", "pod-d"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil || out.Name != "dry-new" {
			t.Fatalf("events.k8s.io dry-run create: %v %v", out, err)
		}
		for _, n := range []string{"dry", "dry-new"} {
			_, err = cs.CoreV1().Events(ns).Get(ctx, n, metav1.GetOptions{})
			cgAPIStatus(t, err, 404, metav1.StatusReasonNotFound)
		}
		l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=pod-d"})
		if err != nil || len(l.Items) != 0 {
			t.Errorf("dry-run objects listed: %v %v", cgCoreNames(l.Items), err)
		}
	})

	t.Run("events.k8s.io create is 201", func(t *testing.T) {
		ev := cgNewEvent(ns, "new1", "pod-n")
		body, _ := json.Marshal(ev)
		code, raw, err := cgDo(ctx, cs.EventsV1().RESTClient().Post().Namespace(ns).Resource("events").
			SetHeader("Content-Type", "application/json").Body(body))
		if err != nil || code != 201 {
			t.Fatalf("POST: code %d err %v body %s", code, err, raw)
		}
		got, err := cs.EventsV1().Events(ns).Get(ctx, "new1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Note != ev.Note || got.Action != ev.Action || got.ReportingController != ev.ReportingController ||
			got.ReportingInstance != ev.ReportingInstance || got.Regarding != ev.Regarding || got.Series != nil ||
			!cgMicro(got.EventTime.Time).Equal(cgMicro(ev.EventTime.Time)) {
			t.Errorf("GET %+v, want %+v", got, ev)
		}
	})
}

func TestClientList(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	ctx := cgCtx(t)

	// Created out of (namespace, name) order on purpose.
	z1 := cgCoreEvent("list-b", "z1", "pod-x")
	z1.Type = corev1.EventTypeWarning
	z1.ReportingController = "ctrl-r" // source.component is kubelet: no fallback
	z1.Labels = map[string]string{"app": "web", "env": "prod"}
	a1 := cgCoreEvent("list-b", "a1", "pod-y")
	a1.Source = corev1.EventSource{Component: "scheduler"}
	a1.Labels = map[string]string{"app": "db"}
	m1 := cgCoreEvent("list-b", "m1", "pod-x")
	m1.Source = corev1.EventSource{}
	m1.ReportingController = "ctrl-r"
	k1 := cgCoreEvent("list-a", "k1", "pod-x")
	k1.Labels = map[string]string{"app": "web", "env": "dev"}
	for _, ev := range []*corev1.Event{z1, a1, m1, k1} {
		cgCreateCore(t, cs, ev)
	}
	cgCreateNew(t, cs, cgNewEvent("list-a", "b1", "pod-z")) // reportingController test-ctrl
	b1 := cgNewEvent("list-a", "b2", "pod-z")
	b1.ReportingController = "ctrl-r"
	cgCreateNew(t, cs, b1)

	all := []string{"list-a/b1", "list-a/b2", "list-a/k1", "list-b/a1", "list-b/m1", "list-b/z1"}

	coreList := func(ns string, opts metav1.ListOptions) []string {
		t.Helper()
		l, err := cs.CoreV1().Events(ns).List(ctx, opts)
		if err != nil {
			t.Fatalf("list %q %+v: %v", ns, opts, err)
		}
		if l.ResourceVersion == "" {
			t.Errorf("list has no resourceVersion")
		}
		return cgCoreNames(l.Items)
	}
	newList := func(ns string, opts metav1.ListOptions) []string {
		t.Helper()
		l, err := cs.EventsV1().Events(ns).List(ctx, opts)
		if err != nil {
			t.Fatalf("events.k8s.io list %q %+v: %v", ns, opts, err)
		}
		return cgNewNames(l.Items)
	}

	t.Run("order", func(t *testing.T) {
		cgEqualNames(t, "core all namespaces", coreList("", metav1.ListOptions{}), all)
		cgEqualNames(t, "events.k8s.io all namespaces", newList("", metav1.ListOptions{}), all)
		cgEqualNames(t, "core list-b", coreList("list-b", metav1.ListOptions{}), all[3:])
		cgEqualNames(t, "events.k8s.io list-a", newList("list-a", metav1.ListOptions{}), all[:3])
		cgEqualNames(t, "empty namespace", coreList("nothing-here", metav1.ListOptions{}), []string{})
	})

	t.Run("core field selectors", func(t *testing.T) {
		for _, c := range []struct {
			ns, sel string
			want    []string
		}{
			{"", "involvedObject.name=pod-x", []string{"list-a/k1", "list-b/m1", "list-b/z1"}},
			{"", "involvedObject.kind=Pod,involvedObject.apiVersion=v1,involvedObject.name=pod-x,involvedObject.namespace=list-b", []string{"list-b/m1", "list-b/z1"}},
			{"", "involvedObject.uid=uid-pod-y", []string{"list-b/a1"}},
			{"", "involvedObject.fieldPath=spec.containers{app}", []string{"list-a/k1", "list-b/a1", "list-b/m1", "list-b/z1"}},
			{"", "type==Warning", []string{"list-b/z1"}},
			{"", "type!=Normal", []string{"list-b/z1"}},
			{"", "reason=Started,type=Normal,metadata.namespace=list-a", []string{"list-a/b1", "list-a/b2", "list-a/k1"}},
			{"", "metadata.name=a1", []string{"list-b/a1"}},
			{"", "source=kubelet", []string{"list-a/k1", "list-b/z1"}},
			{"", "source=scheduler", []string{"list-b/a1"}},
			// falls back to reportingComponent when source.component is empty
			{"", "source=ctrl-r", []string{"list-a/b2", "list-b/m1"}},
			{"", "source=test-ctrl", []string{"list-a/b1"}},
			{"", "reportingComponent=ctrl-r", []string{"list-a/b2", "list-b/m1", "list-b/z1"}},
			{"list-b", "involvedObject.name!=pod-x", []string{"list-b/a1"}},
			{"list-a", "involvedObject.name=pod-x", []string{"list-a/k1"}},
			{"", "involvedObject.name=nobody", []string{}},
		} {
			cgEqualNames(t, fmt.Sprintf("core ns=%q fieldSelector %q", c.ns, c.sel), coreList(c.ns, metav1.ListOptions{FieldSelector: c.sel}), c.want)
		}
	})

	t.Run("events.k8s.io field selectors", func(t *testing.T) {
		for _, c := range []struct {
			ns, sel string
			want    []string
		}{
			{"", "regarding.name=pod-x,reportingController=ctrl-r", []string{"list-b/m1", "list-b/z1"}},
			{"", "regarding.name=pod-z,reportingController=ctrl-r,type=Normal", []string{"list-a/b2"}},
			{"list-a", "regarding.kind=Pod,regarding.namespace=list-a", []string{"list-a/b1", "list-a/b2", "list-a/k1"}},
			{"", "source=ctrl-r", []string{"list-a/b2", "list-b/m1"}},
			{"", "type=Warning", []string{"list-b/z1"}},
			{"", "reportingController!=ctrl-r,metadata.namespace=list-b", []string{"list-b/a1"}},
		} {
			cgEqualNames(t, fmt.Sprintf("events.k8s.io ns=%q fieldSelector %q", c.ns, c.sel), newList(c.ns, metav1.ListOptions{FieldSelector: c.sel}), c.want)
		}
	})

	t.Run("label selectors", func(t *testing.T) {
		for _, c := range []struct {
			sel  string
			want []string
		}{
			{"app=web", []string{"list-a/k1", "list-b/z1"}},
			{"app in (web,db)", []string{"list-a/k1", "list-b/a1", "list-b/z1"}},
			{"!app", []string{"list-a/b1", "list-a/b2", "list-b/m1"}},
			{"app=web,env!=prod", []string{"list-a/k1"}},
			{"env", []string{"list-a/k1", "list-b/z1"}},
			{"app notin (web)", []string{"list-a/b1", "list-a/b2", "list-b/a1", "list-b/m1"}},
		} {
			cgEqualNames(t, fmt.Sprintf("core labelSelector %q", c.sel), coreList("", metav1.ListOptions{LabelSelector: c.sel}), c.want)
			cgEqualNames(t, fmt.Sprintf("events.k8s.io labelSelector %q", c.sel), newList("", metav1.ListOptions{LabelSelector: c.sel}), c.want)
		}
		cgEqualNames(t, "label and field selector", coreList("", metav1.ListOptions{LabelSelector: "app=web", FieldSelector: "type=Normal"}), []string{"list-a/k1"})
	})

	t.Run("pagination", func(t *testing.T) {
		const ns = "page"
		var want []string
		for _, i := range []int{7, 2, 10, 0, 5, 9, 1, 3, 8, 6, 4} {
			cgCreateCore(t, cs, cgCoreEvent(ns, fmt.Sprintf("p%02d", i), "pod-p"))
		}
		for i := 0; i <= 10; i++ {
			want = append(want, fmt.Sprintf("%s/p%02d", ns, i))
		}
		var got []string
		opts := metav1.ListOptions{Limit: 3}
		listRV := ""
		for page := 0; ; page++ {
			if page > 10 {
				t.Fatal("pagination does not end")
			}
			l, err := cs.CoreV1().Events(ns).List(ctx, opts)
			if err != nil {
				t.Fatalf("page %d: %v", page, err)
			}
			if len(l.Items) > 3 {
				t.Errorf("page %d has %d items, limit 3", page, len(l.Items))
			}
			if page == 0 {
				listRV = l.ResourceVersion
				// A write after the first page is not part of this list.
				cgCreateCore(t, cs, cgCoreEvent(ns, "p05x", "pod-p"))
			} else if l.ResourceVersion != listRV {
				t.Errorf("page %d resourceVersion %s, want the first page's %s", page, l.ResourceVersion, listRV)
			}
			got = append(got, cgCoreNames(l.Items)...)
			if l.Continue == "" {
				break
			}
			opts.Continue = l.Continue
		}
		cgEqualNames(t, "paginated list", got, want)

		// All namespaces, events.k8s.io, limit 2: every event exactly once,
		// in (namespace, name) order.
		wantAll := append(append([]string{}, all...), "page/p00", "page/p01", "page/p02", "page/p03", "page/p04",
			"page/p05", "page/p05x", "page/p06", "page/p07", "page/p08", "page/p09", "page/p10")
		got = cgAllPages(t, 20, metav1.ListOptions{Limit: 2}, func(o metav1.ListOptions) ([]string, string, error) {
			l, err := cs.EventsV1().Events("").List(ctx, o)
			if err != nil {
				return nil, "", err
			}
			return cgNewNames(l.Items), l.Continue, nil
		})
		cgEqualNames(t, "paginated all-namespaces list", got, wantAll)

		// Pagination with a selector.
		got = cgAllPages(t, 10, metav1.ListOptions{Limit: 1, FieldSelector: "involvedObject.name=pod-x"}, func(o metav1.ListOptions) ([]string, string, error) {
			l, err := cs.CoreV1().Events("").List(ctx, o)
			if err != nil {
				return nil, "", err
			}
			return cgCoreNames(l.Items), l.Continue, nil
		})
		cgEqualNames(t, "paginated selector list", got, []string{"list-a/k1", "list-b/m1", "list-b/z1"})
	})
}

func TestClientWatch(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	ctx := cgCtx(t)

	t.Run("from a list's resourceVersion", func(t *testing.T) {
		const ns = "w-rv"
		cgCreateCore(t, cs, cgCoreEvent(ns, "e0", "pod"))
		l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e1 := cgCreateCore(t, cs, cgCoreEvent(ns, "e1", "pod"))
		w := cgWatch(t)(cs.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion}))
		got := cgNextCore(t, w, watch.Added, "e1")
		if got.ResourceVersion != e1.ResourceVersion || got.Message != e1.Message {
			t.Errorf("ADDED e1 rv %s msg %q, want %s %q", got.ResourceVersion, got.Message, e1.ResourceVersion, e1.Message)
		}
		patched, err := cs.CoreV1().Events(ns).Patch(ctx, "e1", types.MergePatchType, []byte(`{"message":"changed"}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mod := cgNextCore(t, w, watch.Modified, "e1")
		if mod.ResourceVersion != patched.ResourceVersion || mod.Message != "changed" {
			t.Errorf("MODIFIED rv %s msg %q, want %s changed", mod.ResourceVersion, mod.Message, patched.ResourceVersion)
		}
		if err := cgDeleteJSON(ctx, cs, ns, "e1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		del := cgNextCore(t, w, watch.Deleted, "e1")
		if cgRV(t, del.ResourceVersion) <= cgRV(t, mod.ResourceVersion) {
			t.Errorf("DELETED rv %s not after MODIFIED rv %s", del.ResourceVersion, mod.ResourceVersion)
		}
	})

	t.Run("without resourceVersion sends existing objects first", func(t *testing.T) {
		const ns = "w-init"
		cgCreateCore(t, cs, cgCoreEvent(ns, "e-b", "pod"))
		cgCreateCore(t, cs, cgCoreEvent(ns, "e-a", "pod"))
		cgCreateCore(t, cs, cgCoreEvent("w-init-other", "e-0", "pod"))
		w := cgWatch(t)(cs.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{}))
		cgNextCore(t, w, watch.Added, "e-a")
		cgNextCore(t, w, watch.Added, "e-b")
		cgCreateCore(t, cs, cgCoreEvent("w-init-other", "e-1", "pod")) // other namespace: not seen
		cgCreateCore(t, cs, cgCoreEvent(ns, "e-c", "pod"))
		cgNextCore(t, w, watch.Added, "e-c")
	})

	t.Run("field selector", func(t *testing.T) {
		const ns = "w-fs"
		w := cgWatch(t)(cs.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=target"}))
		cgCreateCore(t, cs, cgCoreEvent(ns, "other1", "other"))
		cgCreateCore(t, cs, cgCoreEvent(ns, "t1", "target"))
		cgNextCore(t, w, watch.Added, "t1")
		for _, n := range []string{"other1", "t1"} {
			if _, err := cs.CoreV1().Events(ns).Patch(ctx, n, types.StrategicMergePatchType, []byte(`{"count":2}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if got := cgNextCore(t, w, watch.Modified, "t1"); got.Count != 2 {
			t.Errorf("MODIFIED count %d", got.Count)
		}
		for _, n := range []string{"other1", "t1"} {
			if err := cgDeleteJSON(ctx, cs, ns, n, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		cgNextCore(t, w, watch.Deleted, "t1")
		// A sentinel proves nothing else was delivered in between.
		cgCreateCore(t, cs, cgCoreEvent(ns, "other2", "other"))
		cgCreateCore(t, cs, cgCoreEvent(ns, "t2", "target"))
		cgNextCore(t, w, watch.Added, "t2")
		// Moving out of the selection is a DELETED for this watch.
		if _, err := cs.CoreV1().Events(ns).Patch(ctx, "t2", types.MergePatchType, []byte(`{"involvedObject":{"name":"other"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		cgNextCore(t, w, watch.Deleted, "t2")
		cgCreateCore(t, cs, cgCoreEvent(ns, "t3", "target"))
		cgNextCore(t, w, watch.Added, "t3")

		// The same on events.k8s.io with its field names.
		// A label selector on a watch.
		lw := cgWatch(t)(cs.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app=web"}))
		unlabelled := cgCoreEvent(ns, "l0", "target")
		cgCreateCore(t, cs, unlabelled)
		labelled := cgCoreEvent(ns, "l1", "other")
		labelled.Labels = map[string]string{"app": "web"}
		cgCreateCore(t, cs, labelled)
		cgNextCore(t, lw, watch.Added, "l1")

		// t3 exists but has no reportingController: no initial event.
		nw := cgWatch(t)(cs.EventsV1().Events(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "regarding.name=target,reportingController=test-ctrl"}))
		other := cgNewEvent(ns, "n0", "target")
		other.ReportingController = "other-ctrl"
		cgCreateNew(t, cs, other)
		cgCreateNew(t, cs, cgNewEvent(ns, "n1", "other"))
		cgCreateNew(t, cs, cgNewEvent(ns, "n2", "target"))
		e := cgNext(t, nw)
		if ne, ok := e.Object.(*eventsv1.Event); !ok || e.Type != watch.Added || ne.Name != "n2" {
			t.Fatalf("events.k8s.io field-selector watch: got %s %+v, want ADDED n2", e.Type, e.Object)
		}
	})

	t.Run("events.k8s.io watch sees core writes in events/v1 shape", func(t *testing.T) {
		const ns = "w-x"
		l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cw := cgWatch(t)(cs.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion}))
		nw := cgWatch(t)(cs.EventsV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion}))
		c1 := cgCreateCore(t, cs, cgCoreEvent(ns, "c1", "pod-1"))
		c2 := cgCreateCore(t, cs, cgCoreEvent(ns, "c2", "pod-2"))
		if _, err := cs.CoreV1().Events(ns).Patch(ctx, "c1", types.StrategicMergePatchType, []byte(`{"count":2,"message":"m2"}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cgDeleteJSON(ctx, cs, ns, "c2", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		wantTypes := []watch.EventType{watch.Added, watch.Added, watch.Modified, watch.Deleted}
		wantNames := []string{"c1", "c2", "c1", "c2"}
		for i := range wantTypes {
			ce := cgNextCore(t, cw, wantTypes[i], wantNames[i])
			if created := []*corev1.Event{c1, c2}; i < 2 && ce.ResourceVersion != created[i].ResourceVersion {
				t.Errorf("ADDED %s rv %s, created with %s", ce.Name, ce.ResourceVersion, created[i].ResourceVersion)
			}
			e := cgNext(t, nw)
			ne, ok := e.Object.(*eventsv1.Event)
			if !ok {
				t.Fatalf("events.k8s.io watch event carries %T, want *v1.Event of events.k8s.io", e.Object)
			}
			if e.Type != wantTypes[i] || ne.Name != wantNames[i] || ne.ResourceVersion != ce.ResourceVersion {
				t.Errorf("events.k8s.io watch: %s %s rv %s, core watch: %s %s rv %s", e.Type, ne.Name, ne.ResourceVersion, wantTypes[i], ce.Name, ce.ResourceVersion)
			}
			if ne.APIVersion != "" && ne.APIVersion != "events.k8s.io/v1" {
				t.Errorf("events.k8s.io watch object apiVersion %q", ne.APIVersion)
			}
			if ne.Note != ce.Message || ne.Regarding != ce.InvolvedObject || ne.DeprecatedCount != ce.Count ||
				ne.DeprecatedSource != ce.Source || !ne.DeprecatedFirstTimestamp.Equal(&ce.FirstTimestamp) || ne.UID != ce.UID {
				t.Errorf("events/v1 object %+v does not map core object %+v", ne, ce)
			}
		}

		// The same stream as JSON frames, as kubectl reads it.
		frames := cgRawWatch(t, p.URL+"/apis/events.k8s.io/v1/namespaces/"+ns+"/events?watch=true&timeoutSeconds=5&resourceVersion="+l.ResourceVersion, 4)
		for i, f := range frames {
			obj, _ := f["object"].(map[string]any)
			md, _ := obj["metadata"].(map[string]any)
			if f["type"] != string(wantTypes[i]) || obj["kind"] != "Event" || obj["apiVersion"] != "events.k8s.io/v1" || md["name"] != wantNames[i] {
				t.Errorf("JSON frame %d: %v", i, f)
			}
			if _, ok := obj["note"]; !ok {
				t.Errorf("JSON frame %d has no note: %v", i, obj)
			}
			for _, k := range []string{"message", "involvedObject", "source"} {
				if _, ok := obj[k]; ok {
					t.Errorf("JSON frame %d has the core/v1 field %q", i, k)
				}
			}
		}
	})

	t.Run("all namespaces", func(t *testing.T) {
		l, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w := cgWatch(t)(cs.CoreV1().Events("").Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion}))
		nw := cgWatch(t)(cs.EventsV1().Events("").Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion}))
		cgCreateCore(t, cs, cgCoreEvent("w-all-1", "a", "pod"))
		cgCreateNew(t, cs, cgNewEvent("w-all-2", "b", "pod"))
		a := cgNextCore(t, w, watch.Added, "a")
		b := cgNextCore(t, w, watch.Added, "b")
		if a.Namespace != "w-all-1" || b.Namespace != "w-all-2" {
			t.Errorf("namespaces %s %s", a.Namespace, b.Namespace)
		}
		for _, want := range []string{"w-all-1/a", "w-all-2/b"} {
			e := cgNext(t, nw)
			if ne, ok := e.Object.(*eventsv1.Event); !ok || e.Type != watch.Added || ne.Namespace+"/"+ne.Name != want {
				t.Errorf("events.k8s.io all-namespaces watch: %s %+v, want ADDED %s", e.Type, e.Object, want)
			}
		}
	})

	t.Run("timeoutSeconds ends the watch", func(t *testing.T) {
		start := time.Now()
		w := cgWatch(t)(cs.CoreV1().Events("w-timeout").Watch(ctx, metav1.ListOptions{TimeoutSeconds: ptr.To[int64](1)}))
		select {
		case e, ok := <-w.ResultChan():
			if ok {
				t.Fatalf("unexpected watch event %s %+v", e.Type, e.Object)
			}
		case <-time.After(cgTimeout):
			t.Fatal("a watch with timeoutSeconds=1 still open after 10s")
		}
		if d := time.Since(start); d < 900*time.Millisecond {
			t.Errorf("watch with timeoutSeconds=1 ended after %v", d)
		}
	})

	t.Run("initial events end bookmark", func(t *testing.T) {
		const ns = "w-bm"
		e1 := cgCreateCore(t, cs, cgCoreEvent(ns, "b1", "pod"))
		e2 := cgCreateCore(t, cs, cgCoreEvent(ns, "b2", "pod"))
		w := cgWatch(t)(cs.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{
			AllowWatchBookmarks:  true,
			SendInitialEvents:    ptr.To(true),
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		}))
		cgNextCore(t, w, watch.Added, "b1")
		cgNextCore(t, w, watch.Added, "b2")
		e := cgNext(t, w)
		if e.Type != watch.Bookmark {
			t.Fatalf("after the initial events got %s %+v, want BOOKMARK", e.Type, e.Object)
		}
		bm, ok := e.Object.(*corev1.Event)
		if !ok {
			t.Fatalf("bookmark carries %T", e.Object)
		}
		if bm.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
			t.Errorf("bookmark annotations %v, want %s: \"true\"", bm.Annotations, metav1.InitialEventsAnnotationKey)
		}
		if cgRV(t, bm.ResourceVersion) < cgRV(t, e2.ResourceVersion) || cgRV(t, e2.ResourceVersion) <= cgRV(t, e1.ResourceVersion) {
			t.Errorf("bookmark rv %s, events rv %s %s", bm.ResourceVersion, e1.ResourceVersion, e2.ResourceVersion)
		}
		cgCreateCore(t, cs, cgCoreEvent(ns, "b0", "pod"))
		cgNextCore(t, w, watch.Added, "b0")
	})
}

// TestClientWatchCompacted provokes history compaction with a short
// --watch-history and expects a watch from the first revision to end with
// an ERROR event carrying 410 Expired.
func TestClientWatchCompacted(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{Args: []string{"--watch-history=1s"}})
	cs := p.Clientset()
	ctx := cgCtx(t)
	const ns = "compact"
	first := cgCreateCore(t, cs, cgCoreEvent(ns, "c1", "pod"))
	for i := 2; i <= 5; i++ {
		cgCreateCore(t, cs, cgCoreEvent(ns, fmt.Sprintf("c%d", i), "pod"))
	}
	// A paginated list started now cannot be continued consistently once
	// its revision is compacted.
	page1, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil || len(page1.Items) != 2 || page1.Continue == "" {
		t.Fatalf("first page: %v %v", page1, err)
	}
	// A write after the first page, so that the page's revision is not
	// the current one when it is compacted.
	cgCreateCore(t, cs, cgCoreEvent(ns, "c9", "pod"))
	// Before compaction the watch replays the later changes.
	var st *metav1.Status
	cgPoll(t, 60*time.Second, "a watch from the first revision to be answered with 410 Expired", func() (bool, string) {
		w, err := cs.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		defer w.Stop()
		e := cgNext(t, w)
		if e.Type != watch.Error {
			ev, _ := e.Object.(*corev1.Event)
			if e.Type != watch.Added || ev == nil || ev.Name != "c2" {
				t.Fatalf("uncompacted watch from c1's revision: got %s %+v, want ADDED c2", e.Type, e.Object)
			}
			time.Sleep(400 * time.Millisecond)
			return false, "watch replayed " + ev.Name
		}
		s, ok := e.Object.(*metav1.Status)
		if !ok {
			t.Fatalf("ERROR event carries %T", e.Object)
		}
		st = s
		return true, ""
	})
	if st.Code != 410 || st.Reason != metav1.StatusReasonExpired || st.Status != metav1.StatusFailure ||
		st.Message != "The resourceVersion for the provided watch is too old." {
		t.Errorf("ERROR status %+v, want 410 Expired %q", st, "The resourceVersion for the provided watch is too old.")
	}
	// A list at exactly that compacted revision is 410 as well.
	_, err = cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	lst := cgAPIStatus(t, err, 410, metav1.StatusReasonExpired)
	if lst.Message != "The resourceVersion for the provided list is too old." {
		t.Errorf("list message %q", lst.Message)
	}
	// The expired continue token: 410 with a token for the inconsistent
	// remainder, which works.
	_, err = cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{Limit: 2, Continue: page1.Continue})
	cst := cgAPIStatus(t, err, 410, metav1.StatusReasonExpired)
	if !strings.HasPrefix(cst.Message, "The provided continue parameter is too old to display a consistent list result.") || cst.ListMeta.Continue == "" {
		t.Errorf("expired continue: message %q, continue %q", cst.Message, cst.ListMeta.Continue)
	} else {
		var rest []string
		opts := metav1.ListOptions{Limit: 2, Continue: cst.ListMeta.Continue}
		for page := 0; page < 10; page++ {
			l, err := cs.CoreV1().Events(ns).List(ctx, opts)
			if err != nil {
				t.Fatalf("inconsistent continue: %v", err)
			}
			rest = append(rest, cgCoreNames(l.Items)...)
			if opts.Continue = l.Continue; l.Continue == "" {
				break
			}
		}
		cgEqualNames(t, "remainder of the list", rest, []string{ns + "/c3", ns + "/c4", ns + "/c5", ns + "/c9"})
	}
	// A fresh watch still works.
	l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 6 {
		t.Fatalf("list after compaction: %v %v", l, err)
	}
	w := cgWatch(t)(cs.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion}))
	cgCreateCore(t, cs, cgCoreEvent(ns, "c6", "pod"))
	cgNextCore(t, w, watch.Added, "c6")
}

func TestClientUpdate(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	ctx := cgCtx(t)
	const ns = "update"
	orig := cgCreateCore(t, cs, cgCoreEvent(ns, "u1", "pod"))

	put := func(ev *corev1.Event) (int, []byte, error) {
		body, _ := json.Marshal(ev)
		return cgDo(ctx, cs.CoreV1().RESTClient().Put().Namespace(ns).Resource("events").Name(ev.Name).
			SetHeader("Content-Type", "application/json").Body(body))
	}

	upd := orig.DeepCopy()
	upd.Message, upd.Count = "updated", 7
	code, raw, err := put(upd)
	if err != nil || code != 200 {
		t.Fatalf("PUT: %d %v %s", code, err, raw)
	}
	var got corev1.Event
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Message != "updated" || got.Count != 7 || got.UID != orig.UID || cgRV(t, got.ResourceVersion) <= cgRV(t, orig.ResourceVersion) ||
		!got.CreationTimestamp.Equal(&orig.CreationTimestamp) {
		t.Errorf("PUT result %+v", got)
	}

	// The typed client, with a stale resourceVersion: 409.
	stale := orig.DeepCopy()
	stale.Message = "stale"
	_, err = cs.CoreV1().Events(ns).Update(ctx, stale, metav1.UpdateOptions{})
	st := cgAPIStatus(t, err, 409, metav1.StatusReasonConflict)
	if want := `Operation cannot be fulfilled on events "u1": the object has been modified; please apply your changes to the latest version and try again`; st.Message != want {
		t.Errorf("conflict message %q, want %q", st.Message, want)
	}
	if cur, err := cs.CoreV1().Events(ns).Get(ctx, "u1", metav1.GetOptions{}); err != nil || cur.Message != "updated" {
		t.Errorf("after the conflict: %+v %v", cur, err)
	}

	// Typed update with the current resourceVersion.
	cur := got.DeepCopy()
	cur.Message = "typed"
	out, err := cs.CoreV1().Events(ns).Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil || out.Message != "typed" {
		t.Fatalf("typed update: %v %v", out, err)
	}

	// Without a resourceVersion: unconditional.
	unc := out.DeepCopy()
	unc.ResourceVersion, unc.Message = "", "unconditional"
	code, raw, err = put(unc)
	if err != nil || code != 200 {
		t.Errorf("unconditional PUT (no resourceVersion): %d %v %s, want 200", code, err, raw)
	} else if g, err := cs.CoreV1().Events(ns).Get(ctx, "u1", metav1.GetOptions{}); err != nil || g.Message != "unconditional" {
		t.Errorf("after the unconditional PUT: %+v %v", g, err)
	}

	// PUT of a missing name creates it.
	missing := cgCoreEvent(ns, "u-new", "pod")
	code, raw, err = put(missing)
	if err != nil || code != 201 {
		t.Fatalf("PUT of a missing event: %d %v %s, want 201", code, err, raw)
	}
	if g, err := cs.CoreV1().Events(ns).Get(ctx, "u-new", metav1.GetOptions{}); err != nil || g.Message != missing.Message || g.UID == "" {
		t.Errorf("PUT-created event: %+v %v", g, err)
	}

	// metadata.uid is immutable; creationTimestamp is kept from the
	// stored object.
	cur, err = cs.CoreV1().Events(ns).Get(ctx, "u1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	badUID := cur.DeepCopy()
	badUID.UID = "another-uid"
	_, err = cs.CoreV1().Events(ns).Update(ctx, badUID, metav1.UpdateOptions{})
	ust := cgAPIStatus(t, err, 422, metav1.StatusReasonInvalid)
	if !strings.Contains(ust.Message, `metadata.uid: Invalid value: "another-uid": field is immutable`) {
		t.Errorf("uid change message %q", ust.Message)
	}
	ct := cur.DeepCopy()
	ct.CreationTimestamp = metav1.NewTime(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	ct.Message = "creation timestamp"
	if out, err := cs.CoreV1().Events(ns).Update(ctx, ct, metav1.UpdateOptions{}); err != nil || !out.CreationTimestamp.Equal(&orig.CreationTimestamp) || out.UID != orig.UID {
		t.Errorf("update with another creationTimestamp: %+v %v, want the original %v kept", out, err, orig.CreationTimestamp)
	}

	// dryRun=All on update: 200, nothing written.
	cur, err = cs.CoreV1().Events(ns).Get(ctx, "u1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dry := cur.DeepCopy()
	dry.Message = "dry"
	if out, err := cs.CoreV1().Events(ns).Update(ctx, dry, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil || out.Message != "dry" {
		t.Errorf("dry-run update: %+v %v", out, err)
	}
	if after, err := cs.CoreV1().Events(ns).Get(ctx, "u1", metav1.GetOptions{}); err != nil || after.ResourceVersion != cur.ResourceVersion || after.Message != cur.Message {
		t.Errorf("dry-run update was stored: %+v %v", after, err)
	}

	// events.k8s.io update of a mutable field.
	n := cgCreateNew(t, cs, cgNewEvent(ns, "n1", "pod"))
	n.Labels = map[string]string{"l": "v"}
	nout, err := cs.EventsV1().Events(ns).Update(ctx, n, metav1.UpdateOptions{})
	if err != nil || nout.Labels["l"] != "v" {
		t.Fatalf("events.k8s.io update of labels: %v %v", nout, err)
	}
}

func TestClientPatch(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	ctx := cgCtx(t)
	const ns = "patch"
	orig := cgCreateCore(t, cs, cgCoreEvent(ns, "p1", "pod"))
	w := cgWatch(t)(cs.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: orig.ResourceVersion}))

	t.Run("strategic merge patch as tools/record sends it", func(t *testing.T) {
		code, raw, err := cgDo(ctx, cs.CoreV1().RESTClient().Patch(types.StrategicMergePatchType).Namespace(ns).Resource("events").Name("p1").
			Body([]byte(`{"count":2,"lastTimestamp":"2030-01-01T00:01:00Z","message":"m2"}`)))
		if err != nil || code != 200 {
			t.Fatalf("PATCH: %d %v %s", code, err, raw)
		}
		var got corev1.Event
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if got.Count != 2 || got.Message != "m2" || !got.LastTimestamp.Time.Equal(time.Date(2030, 1, 1, 0, 1, 0, 0, time.UTC)) ||
			!got.FirstTimestamp.Equal(&orig.FirstTimestamp) || got.Source != orig.Source || got.UID != orig.UID ||
			cgRV(t, got.ResourceVersion) <= cgRV(t, orig.ResourceVersion) {
			t.Errorf("patched %+v", got)
		}
		mod := cgNextCore(t, w, watch.Modified, "p1")
		if mod.ResourceVersion != got.ResourceVersion || mod.Count != 2 || mod.Message != "m2" {
			t.Errorf("MODIFIED %+v", mod)
		}
	})

	t.Run("merge patch", func(t *testing.T) {
		got, err := cs.CoreV1().Events(ns).Patch(ctx, "p1", types.MergePatchType, []byte(`{"metadata":{"labels":{"k":"v"}},"reason":"R2"}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Labels["k"] != "v" || got.Reason != "R2" || got.Message != "m2" || got.Count != 2 {
			t.Errorf("merge-patched %+v", got)
		}
		cgNextCore(t, w, watch.Modified, "p1")
	})

	t.Run("JSON patch", func(t *testing.T) {
		got, err := cs.CoreV1().Events(ns).Patch(ctx, "p1", types.JSONPatchType,
			[]byte(`[{"op":"replace","path":"/message","value":"m3"},{"op":"add","path":"/metadata/annotations","value":{"a":"b"}}]`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Message != "m3" || got.Annotations["a"] != "b" || got.Labels["k"] != "v" || got.Reason != "R2" {
			t.Errorf("JSON-patched %+v", got)
		}
		mod := cgNextCore(t, w, watch.Modified, "p1")
		if mod.Message != "m3" {
			t.Errorf("MODIFIED message %q", mod.Message)
		}
	})

	t.Run("patch carrying a resourceVersion", func(t *testing.T) {
		cur, err := cs.CoreV1().Events(ns).Get(ctx, "p1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cs.CoreV1().Events(ns).Patch(ctx, "p1", types.MergePatchType,
			[]byte(`{"metadata":{"resourceVersion":"`+orig.ResourceVersion+`"},"message":"stale"}`), metav1.PatchOptions{})
		st := cgAPIStatus(t, err, 409, metav1.StatusReasonConflict)
		if want := `Operation cannot be fulfilled on events "p1": the object has been modified; please apply your changes to the latest version and try again`; st.Message != want {
			t.Errorf("message %q, want %q", st.Message, want)
		}
		got, err := cs.CoreV1().Events(ns).Patch(ctx, "p1", types.MergePatchType,
			[]byte(`{"metadata":{"resourceVersion":"`+cur.ResourceVersion+`"},"message":"fresh"}`), metav1.PatchOptions{})
		if err != nil || got.Message != "fresh" {
			t.Fatalf("patch with the current resourceVersion: %+v %v", got, err)
		}
		cgNextCore(t, w, watch.Modified, "p1")
	})

	t.Run("events.k8s.io series patch", func(t *testing.T) {
		n := cgCreateNew(t, cs, cgNewEvent(ns, "s1", "pod-s"))
		cgNextCore(t, w, watch.Added, "s1")
		code, raw, err := cgDo(ctx, cs.EventsV1().RESTClient().Patch(types.StrategicMergePatchType).Namespace(ns).Resource("events").Name("s1").
			Body([]byte(`{"series":{"count":2,"lastObservedTime":"2030-01-01T00:01:00.000005Z"}}`)))
		if err != nil || code != 200 {
			t.Fatalf("PATCH: %d %v %s", code, err, raw)
		}
		var got eventsv1.Event
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if got.Series == nil || got.Series.Count != 2 || cgRV(t, got.ResourceVersion) <= cgRV(t, n.ResourceVersion) || got.Note != n.Note {
			t.Errorf("series-patched %+v", got)
		}
		core, err := cs.CoreV1().Events(ns).Get(ctx, "s1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantObs := time.Date(2030, 1, 1, 0, 1, 0, 5000, time.UTC)
		if core.Series == nil || core.Series.Count != 2 || !core.Series.LastObservedTime.Time.Equal(wantObs) {
			t.Errorf("core/v1 view of the series: %+v", core.Series)
		}
		m := cgRawJSON(t, cs, "/api/v1/namespaces/"+ns+"/events/s1")
		series, _ := m["series"].(map[string]any)
		if series["count"] != float64(2) || series["lastObservedTime"] != "2030-01-01T00:01:00.000005Z" {
			t.Errorf("core/v1 JSON series %v", m["series"])
		}
		mod := cgNextCore(t, w, watch.Modified, "s1")
		if mod.Series == nil || mod.Series.Count != 2 {
			t.Errorf("MODIFIED series %+v", mod.Series)
		}
	})

	t.Run("events.k8s.io note is immutable, core/v1 message is not", func(t *testing.T) {
		_, err := cs.EventsV1().Events(ns).Patch(ctx, "s1", types.StrategicMergePatchType, []byte(`{"note":"changed"}`), metav1.PatchOptions{})
		st := cgAPIStatus(t, err, 422, metav1.StatusReasonInvalid)
		if !strings.Contains(st.Message, `message: Invalid value: "changed": field is immutable`) || !strings.Contains(st.Message, `"s1" is invalid`) {
			t.Errorf("message %q", st.Message)
		}
		if st.Details == nil || !slices.ContainsFunc(st.Details.Causes, func(c metav1.StatusCause) bool {
			return c.Field == "message" && c.Type == metav1.CauseTypeFieldValueInvalid
		}) {
			t.Errorf("causes %+v, want a FieldValueInvalid on message", st.Details)
		}
		for _, patch := range []string{`{"reason":"Other"}`, `{"type":"Warning"}`, `{"action":"Other"}`, `{"regarding":{"name":"other"}}`} {
			_, err := cs.EventsV1().Events(ns).Patch(ctx, "s1", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			cgAPIStatus(t, err, 422, metav1.StatusReasonInvalid)
		}
		if got, err := cs.EventsV1().Events(ns).Get(ctx, "s1", metav1.GetOptions{}); err != nil || got.Note != "note of s1" || got.Reason != "Started" {
			t.Errorf("rejected patches changed the event: %+v %v", got, err)
		}
		got, err := cs.CoreV1().Events(ns).Patch(ctx, "s1", types.StrategicMergePatchType, []byte(`{"message":"changed"}`), metav1.PatchOptions{})
		if err != nil || got.Message != "changed" {
			t.Fatalf("core/v1 patch of message: %+v %v", got, err)
		}
		if mod := cgNextCore(t, w, watch.Modified, "s1"); mod.Message != "changed" {
			t.Errorf("MODIFIED message %q", mod.Message)
		}
		if n, err := cs.EventsV1().Events(ns).Get(ctx, "s1", metav1.GetOptions{}); err != nil || n.Note != "changed" {
			t.Errorf("events.k8s.io view after core patch: %+v %v", n, err)
		}
	})

	t.Run("events.k8s.io may change labels and annotations", func(t *testing.T) {
		got, err := cs.EventsV1().Events(ns).Patch(ctx, "s1", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"x"},"annotations":{"note":"y"}}}`), metav1.PatchOptions{})
		if err != nil || got.Labels["tier"] != "x" || got.Annotations["note"] != "y" {
			t.Fatalf("events.k8s.io label patch: %+v %v", got, err)
		}
		cgNextCore(t, w, watch.Modified, "s1")
	})

	t.Run("dryRun=All patch stores nothing", func(t *testing.T) {
		cur, err := cs.CoreV1().Events(ns).Get(ctx, "p1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := cs.CoreV1().Events(ns).Patch(ctx, "p1", types.MergePatchType, []byte(`{"message":"dry"}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil || got.Message != "dry" {
			t.Fatalf("dry-run patch: %+v %v", got, err)
		}
		if after, err := cs.CoreV1().Events(ns).Get(ctx, "p1", metav1.GetOptions{}); err != nil || after.ResourceVersion != cur.ResourceVersion || after.Message != cur.Message {
			t.Errorf("dry-run patch was stored: %+v %v", after, err)
		}
		// The watcher sees the next real change, not the dry run.
		if _, err := cs.CoreV1().Events(ns).Patch(ctx, "p1", types.MergePatchType, []byte(`{"message":"real"}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if mod := cgNextCore(t, w, watch.Modified, "p1"); mod.Message != "real" {
			t.Errorf("MODIFIED message %q, want real", mod.Message)
		}
	})

	t.Run("patch of a missing event is 404", func(t *testing.T) {
		_, err := cs.CoreV1().Events(ns).Patch(ctx, "missing", types.StrategicMergePatchType, []byte(`{"count":2}`), metav1.PatchOptions{})
		st := cgAPIStatus(t, err, 404, metav1.StatusReasonNotFound)
		if st.Message != `events "missing" not found` {
			t.Errorf("message %q", st.Message)
		}
		_, err = cs.EventsV1().Events(ns).Patch(ctx, "missing", types.StrategicMergePatchType, []byte(`{"series":{"count":2,"lastObservedTime":"2030-01-01T00:01:00.000005Z"}}`), metav1.PatchOptions{})
		cgAPIStatus(t, err, 404, metav1.StatusReasonNotFound)
		if _, err := cs.CoreV1().Events(ns).Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("patch created the event: %v", err)
		}
	})
}

func TestClientDelete(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	ctx := cgCtx(t)
	const ns = "delete"

	t.Run("delete then get", func(t *testing.T) {
		d1 := cgCreateCore(t, cs, cgCoreEvent(ns, "d1", "pod"))
		code, raw, err := cgDo(ctx, cs.CoreV1().RESTClient().Delete().Namespace(ns).Resource("events").Name("d1").
			SetHeader("Content-Type", "application/json").Body([]byte(`{"propagationPolicy":"Background"}`)))
		if err != nil || code != 200 {
			t.Fatalf("DELETE: %d %v %s", code, err, raw)
		}
		var st metav1.Status
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatal(err)
		}
		if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusSuccess || st.Details == nil ||
			st.Details.Name != "d1" || st.Details.Kind != "events" || st.Details.Group != "" || st.Details.UID != d1.UID {
			t.Errorf("DELETE body %s", raw)
		}
		_, err = cs.CoreV1().Events(ns).Get(ctx, "d1", metav1.GetOptions{})
		gst := cgAPIStatus(t, err, 404, metav1.StatusReasonNotFound)
		if gst.Message != `events "d1" not found` || gst.Details == nil || gst.Details.Name != "d1" || gst.Details.Kind != "events" || gst.Details.Group != "" {
			t.Errorf("404 status %+v", gst)
		}
		_, err = cs.EventsV1().Events(ns).Get(ctx, "d1", metav1.GetOptions{})
		nst := cgAPIStatus(t, err, 404, metav1.StatusReasonNotFound)
		// apierrors.NewNotFound names the group-qualified resource.
		if nst.Message != `events.events.k8s.io "d1" not found` {
			t.Errorf("events.k8s.io 404 message %q", nst.Message)
		}
		if nst.Details == nil || nst.Details.Group != "events.k8s.io" || nst.Details.Kind != "events" {
			t.Errorf("events.k8s.io 404 details %+v", nst.Details)
		}
		// No body at all, as curl would send it; the event is gone: 404.
		_, _, err = cgDo(ctx, cs.CoreV1().RESTClient().Delete().Namespace(ns).Resource("events").Name("d1"))
		cgAPIStatus(t, err, 404, metav1.StatusReasonNotFound)

		// Through events.k8s.io: details carry the group.
		cgCreateNew(t, cs, cgNewEvent(ns, "dn", "pod"))
		raw, err = cs.EventsV1().RESTClient().Delete().AbsPath("/apis/events.k8s.io/v1/namespaces/" + ns + "/events/dn").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st = metav1.Status{}
		if err := json.Unmarshal(raw, &st); err != nil || st.Status != metav1.StatusSuccess || st.Details == nil || st.Details.Group != "events.k8s.io" || st.Details.Name != "dn" {
			t.Errorf("events.k8s.io DELETE body %s", raw)
		}
	})

	// The generated typed clients of client-go send DeleteOptions as
	// protobuf (Content-Type application/vnd.kubernetes.protobuf), as they
	// do against kube-apiserver.
	t.Run("typed client delete", func(t *testing.T) {
		cgCreateCore(t, cs, cgCoreEvent(ns, "t1", "pod"))
		cgCreateNew(t, cs, cgNewEvent(ns, "t2", "pod"))
		if err := cs.CoreV1().Events(ns).Delete(ctx, "t1", metav1.DeleteOptions{}); err != nil {
			t.Errorf("typed core/v1 Delete: %v", err)
		}
		if err := cs.EventsV1().Events(ns).Delete(ctx, "t2", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
			t.Errorf("typed events.k8s.io Delete: %v", err)
		}
		for _, n := range []string{"t1", "t2"} {
			if _, err := cs.CoreV1().Events(ns).Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("after the typed Delete of %s, Get gives %v, want NotFound", n, err)
			}
		}
		err := cs.CoreV1().Events(ns).Delete(ctx, "t1", metav1.DeleteOptions{})
		st := cgAPIStatus(t, err, 404, metav1.StatusReasonNotFound)
		if st.Message != `events "t1" not found` {
			t.Errorf("typed Delete of a missing event: %q", st.Message)
		}
	})

	t.Run("dryRun=All delete keeps the event", func(t *testing.T) {
		cgCreateCore(t, cs, cgCoreEvent(ns, "dry", "pod"))
		if err := cgDeleteJSON(ctx, cs, ns, "dry", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("dry-run delete: %v", err)
		}
		if _, err := cs.CoreV1().Events(ns).Get(ctx, "dry", metav1.GetOptions{}); err != nil {
			t.Errorf("dry-run delete removed the event: %v", err)
		}
	})

	t.Run("UID precondition", func(t *testing.T) {
		d2 := cgCreateCore(t, cs, cgCoreEvent(ns, "d2", "pod"))
		want := fmt.Sprintf(`Operation cannot be fulfilled on events "d2": Precondition failed: UID in precondition: wrong-uid, UID in object meta: %s`, d2.UID)
		wrong := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("wrong-uid"))}}
		st := cgAPIStatus(t, cgDeleteJSON(ctx, cs, ns, "d2", wrong), 409, metav1.StatusReasonConflict)
		if st.Message != want {
			t.Errorf("message %q, want %q", st.Message, want)
		}
		if _, err := cs.CoreV1().Events(ns).Get(ctx, "d2", metav1.GetOptions{}); err != nil {
			t.Fatalf("event deleted despite the failed precondition: %v", err)
		}
		t.Run("typed client", func(t *testing.T) {
			err := cs.CoreV1().Events(ns).Delete(ctx, "d2", wrong)
			st := cgAPIStatus(t, err, 409, metav1.StatusReasonConflict)
			if st.Message != want {
				t.Errorf("message %q, want %q", st.Message, want)
			}
		})
		if _, err := cs.CoreV1().Events(ns).Get(ctx, "d2", metav1.GetOptions{}); err != nil {
			t.Fatalf("event deleted despite the failed precondition: %v", err)
		}
		if err := cgDeleteJSON(ctx, cs, ns, "d2", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &d2.UID}}); err != nil {
			t.Errorf("delete with the right UID: %v", err)
		}
		if _, err := cs.CoreV1().Events(ns).Get(ctx, "d2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after delete with the right UID: %v", err)
		}
	})

	t.Run("deletecollection with a field selector", func(t *testing.T) {
		setup := func(t *testing.T, dns string) string {
			for _, e := range [][2]string{{"dc-1", "pod-a"}, {"dc-2", "pod-b"}, {"dc-3", "pod-a"}} {
				ev := cgCoreEvent(dns, e[0], e[1])
				cgCreateCore(t, cs, ev)
			}
			other := cgCoreEvent(dns+"-other", "dc-1", "pod-a")
			cgCreateCore(t, cs, other)
			l, err := cs.CoreV1().Events(dns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return l.ResourceVersion
		}
		check := func(t *testing.T, dns string, w watch.Interface) {
			cgNextCore(t, w, watch.Deleted, "dc-1")
			cgNextCore(t, w, watch.Deleted, "dc-3")
			var names []string
			for _, n := range []string{dns, dns + "-other"} {
				l, err := cs.CoreV1().Events(n).List(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, cgCoreNames(l.Items)...)
			}
			cgEqualNames(t, "after deletecollection", names, []string{dns + "/dc-2", dns + "-other/dc-1"})
		}

		rv := setup(t, "dc")
		w := cgWatch(t)(cs.CoreV1().Events("dc").Watch(ctx, metav1.ListOptions{ResourceVersion: rv}))
		code, raw, err := cgDo(ctx, cs.CoreV1().RESTClient().Delete().Namespace("dc").Resource("events").
			Param("fieldSelector", "involvedObject.name=pod-a"))
		if err != nil || code != 200 {
			t.Fatalf("DELETE collection: %d %v %s", code, err, raw)
		}
		var deleted corev1.EventList
		if err := json.Unmarshal(raw, &deleted); err != nil || deleted.Kind != "EventList" || len(deleted.Items) != 2 {
			t.Errorf("DELETE collection body: %s (%v), want an EventList of the 2 deleted events", raw, err)
		}
		check(t, "dc", w)

		// events.k8s.io, with its field names.
		rv = setup(t, "dcn")
		w = cgWatch(t)(cs.CoreV1().Events("dcn").Watch(ctx, metav1.ListOptions{ResourceVersion: rv}))
		code, raw, err = cgDo(ctx, cs.EventsV1().RESTClient().Delete().AbsPath("/apis/events.k8s.io/v1/namespaces/dcn/events").
			Param("fieldSelector", "regarding.name=pod-a"))
		if err != nil || code != 200 {
			t.Fatalf("DELETE events.k8s.io collection: %d %v %s", code, err, raw)
		}
		check(t, "dcn", w)

		t.Run("typed client", func(t *testing.T) {
			rv := setup(t, "dct")
			w := cgWatch(t)(cs.CoreV1().Events("dct").Watch(ctx, metav1.ListOptions{ResourceVersion: rv}))
			if err := cs.CoreV1().Events("dct").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "involvedObject.name=pod-a"}); err != nil {
				t.Fatalf("typed DeleteCollection: %v", err)
			}
			check(t, "dct", w)
		})
	})
}

func TestClientCrossGroup(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	ctx := cgCtx(t)
	const ns = "cross"

	t.Run("core/v1 write read through events.k8s.io", func(t *testing.T) {
		in := cgCoreEvent(ns, "legacy", "pod-l")
		in.ReportingController, in.ReportingInstance = "kubelet", "node1"
		in.Related = &corev1.ObjectReference{Kind: "Node", Name: "node1", APIVersion: "v1"}
		c := cgCreateCore(t, cs, in)
		n, err := cs.EventsV1().Events(ns).Get(ctx, "legacy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Regarding != c.InvolvedObject || n.Note != c.Message || n.DeprecatedSource != c.Source || n.DeprecatedCount != c.Count ||
			!n.DeprecatedFirstTimestamp.Equal(&c.FirstTimestamp) || !n.DeprecatedLastTimestamp.Equal(&c.LastTimestamp) ||
			n.ReportingController != c.ReportingController || n.ReportingInstance != c.ReportingInstance || n.Reason != c.Reason ||
			n.Type != c.Type || !n.EventTime.IsZero() || n.Series != nil || n.Related == nil || *n.Related != *c.Related ||
			n.UID != c.UID || n.ResourceVersion != c.ResourceVersion {
			t.Errorf("events.k8s.io view %+v of core event %+v", n, c)
		}
		m := cgRawJSON(t, cs, "/apis/events.k8s.io/v1/namespaces/"+ns+"/events/legacy")
		cgJSONString(t, m, "kind", "Event")
		cgJSONString(t, m, "apiVersion", "events.k8s.io/v1")
		cgJSONNull(t, m, "eventTime")
		cgJSONString(t, m, "note", c.Message)
		cgJSONString(t, m, "reportingController", "kubelet")
		for _, k := range []string{"message", "involvedObject", "source", "count", "firstTimestamp", "lastTimestamp", "reportingComponent", "series"} {
			cgJSONAbsent(t, m, k)
		}
		if src, _ := m["deprecatedSource"].(map[string]any); src["component"] != "kubelet" || src["host"] != "node1" {
			t.Errorf("deprecatedSource %v", m["deprecatedSource"])
		}
		if m["deprecatedCount"] != float64(1) {
			t.Errorf("deprecatedCount %v", m["deprecatedCount"])
		}
		cgJSONString(t, m, "deprecatedFirstTimestamp", c.FirstTimestamp.UTC().Format(time.RFC3339))
		if reg, _ := m["regarding"].(map[string]any); reg["name"] != "pod-l" || reg["kind"] != "Pod" || reg["fieldPath"] != "spec.containers{app}" {
			t.Errorf("regarding %v", m["regarding"])
		}

		// The same object's own core/v1 JSON.
		cm := cgRawJSON(t, cs, "/api/v1/namespaces/"+ns+"/events/legacy")
		cgJSONString(t, cm, "apiVersion", "v1")
		cgJSONNull(t, cm, "eventTime")
		cgJSONString(t, cm, "reportingComponent", "kubelet")
		cgJSONString(t, cm, "message", c.Message)
		cgJSONAbsent(t, cm, "note")
	})

	t.Run("core/v1 legacy event shape", func(t *testing.T) {
		in := cgCoreEvent(ns, "bare", "pod-b")
		in.Source = corev1.EventSource{}
		in.FirstTimestamp, in.LastTimestamp = metav1.Time{}, metav1.Time{}
		cgCreateCore(t, cs, in)
		m := cgRawJSON(t, cs, "/api/v1/namespaces/"+ns+"/events/bare")
		cgJSONNull(t, m, "eventTime")
		cgJSONNull(t, m, "firstTimestamp")
		cgJSONNull(t, m, "lastTimestamp")
		cgJSONEmptyObject(t, m, "source")
		cgJSONString(t, m, "reportingComponent", "")
		cgJSONString(t, m, "reportingInstance", "")
		nm := cgRawJSON(t, cs, "/apis/events.k8s.io/v1/namespaces/"+ns+"/events/bare")
		cgJSONNull(t, nm, "eventTime")
		cgJSONEmptyObject(t, nm, "deprecatedSource")
		cgJSONNull(t, nm, "deprecatedFirstTimestamp")
		cgJSONNull(t, nm, "deprecatedLastTimestamp")
		cgJSONAbsent(t, nm, "reportingController")
	})

	t.Run("events.k8s.io write read through core/v1", func(t *testing.T) {
		in := cgNewEvent(ns, "modern", "pod-m")
		in.Related = &corev1.ObjectReference{Kind: "Node", Name: "node1", APIVersion: "v1"}
		n := cgCreateNew(t, cs, in)
		c, err := cs.CoreV1().Events(ns).Get(ctx, "modern", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.InvolvedObject != n.Regarding || c.Message != n.Note || c.ReportingController != "test-ctrl" || c.ReportingInstance != "test-ctrl-host1" ||
			c.Action != "Start" || c.Reason != "Started" || c.Type != "Normal" || c.Count != 0 || c.Source != (corev1.EventSource{}) ||
			!c.FirstTimestamp.IsZero() || !c.LastTimestamp.IsZero() || c.Related == nil || c.Related.Name != "node1" ||
			!cgMicro(c.EventTime.Time).Equal(cgMicro(in.EventTime.Time)) || c.UID != n.UID || c.ResourceVersion != n.ResourceVersion {
			t.Errorf("core/v1 view %+v of events.k8s.io event %+v", c, n)
		}
		m := cgRawJSON(t, cs, "/api/v1/namespaces/"+ns+"/events/modern")
		cgJSONString(t, m, "kind", "Event")
		cgJSONString(t, m, "apiVersion", "v1")
		cgJSONEmptyObject(t, m, "source")
		cgJSONNull(t, m, "firstTimestamp")
		cgJSONNull(t, m, "lastTimestamp")
		cgJSONString(t, m, "reportingComponent", "test-ctrl")
		cgJSONString(t, m, "reportingInstance", "test-ctrl-host1")
		cgJSONString(t, m, "message", in.Note)
		cgJSONString(t, m, "action", "Start")
		cgJSONAbsent(t, m, "count")
		cgJSONAbsent(t, m, "note")
		cgJSONAbsent(t, m, "regarding")
		if et, _ := m["eventTime"].(string); !cgMicroTimeRE.MatchString(et) {
			t.Errorf("core/v1 eventTime %v, want RFC3339 with 6 fractional digits", m["eventTime"])
		}
		if io, _ := m["involvedObject"].(map[string]any); io["name"] != "pod-m" || io["uid"] != "uid-pod-m" {
			t.Errorf("involvedObject %v", m["involvedObject"])
		}
		nm := cgRawJSON(t, cs, "/apis/events.k8s.io/v1/namespaces/"+ns+"/events/modern")
		cgJSONEmptyObject(t, nm, "deprecatedSource")
		cgJSONNull(t, nm, "deprecatedFirstTimestamp")
		cgJSONNull(t, nm, "deprecatedLastTimestamp")
		cgJSONAbsent(t, nm, "deprecatedCount")
		if et, _ := nm["eventTime"].(string); !cgMicroTimeRE.MatchString(et) || et != m["eventTime"] {
			t.Errorf("events.k8s.io eventTime %v, core/v1 %v", nm["eventTime"], m["eventTime"])
		}
	})

	t.Run("lists agree", func(t *testing.T) {
		cl, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nl, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cgEqualNames(t, "core list", cgCoreNames(cl.Items), []string{ns + "/bare", ns + "/legacy", ns + "/modern"})
		cgEqualNames(t, "events.k8s.io list", cgNewNames(nl.Items), cgCoreNames(cl.Items))
		for i := range cl.Items {
			if i < len(nl.Items) && (cl.Items[i].ResourceVersion != nl.Items[i].ResourceVersion || cl.Items[i].UID != nl.Items[i].UID) {
				t.Errorf("item %d: core rv/uid %s/%s, events.k8s.io %s/%s", i, cl.Items[i].ResourceVersion, cl.Items[i].UID, nl.Items[i].ResourceVersion, nl.Items[i].UID)
			}
		}
		lm := cgRawJSON(t, cs, "/apis/events.k8s.io/v1/namespaces/"+ns+"/events")
		cgJSONString(t, lm, "kind", "EventList")
		cgJSONString(t, lm, "apiVersion", "events.k8s.io/v1")
		items, _ := lm["items"].([]any)
		for _, it := range items {
			im, _ := it.(map[string]any)
			if im["kind"] != "Event" || im["apiVersion"] != "events.k8s.io/v1" {
				t.Errorf("list item kind/apiVersion %v %v", im["kind"], im["apiVersion"])
			}
		}
		cm := cgRawJSON(t, cs, "/api/v1/namespaces/"+ns+"/events")
		cgJSONString(t, cm, "kind", "EventList")
		cgJSONString(t, cm, "apiVersion", "v1")
	})
}
