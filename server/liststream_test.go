package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage"
)

// fill stores n events with messages of size bytes directly in the store,
// in namespaces ns0..ns9.
func fill(t *testing.T, ctx context.Context, store storage.Interface, n, size int) {
	t.Helper()
	msg := strings.Repeat("m", size)
	for i := range n {
		ns := fmt.Sprintf("ns%d", i%10)
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("e%05d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: fmt.Sprintf("p%d", i), Namespace: ns},
			Reason:         "Started", Message: msg, Type: corev1.EventTypeNormal}
		if _, err := store.Create(ctx, ev, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// get returns the status, Content-Type and body of a GET with accept.
func (e *env) get(path, accept string) (int, string, []byte) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, e.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// TestListOfEveryEventIsStreamed: a list without a limit of more events
// than a page is streamed page by page, and the answer is the document a
// whole list gives: JSON in both groups (re-encoding the decoded list
// gives the same bytes) and a Table kubectl prints in full (protobuf:
// TestListOfEveryEventInProtobuf).
func TestListOfEveryEventIsStreamed(t *testing.T) {
	var store storage.Interface
	e := newEnvWith(t, time.Hour, func(c *server.Config) { store = c.Store })
	const n = 700 // three pages
	fill(t, e.ctx, store, n, 100)

	code, ct, body := e.get("/api/v1/events", "application/json")
	var core corev1.EventList
	if err := json.Unmarshal(body, &core); code != http.StatusOK || ct != "application/json" || err != nil {
		t.Fatalf("core/v1 list: %d %s %v", code, ct, err)
	}
	if len(core.Items) != n || core.ResourceVersion != fmt.Sprint(store.Revision()) || core.Continue != "" {
		t.Fatalf("core/v1 list: %d items at %q, continue %q; want %d at %d", len(core.Items), core.ResourceVersion, core.Continue, n, store.Revision())
	}
	for i := 1; i < n; i++ {
		if a, b := core.Items[i-1], core.Items[i]; a.Namespace+"/"+a.Name >= b.Namespace+"/"+b.Name {
			t.Fatalf("items %d and %d out of order: %s/%s, %s/%s", i-1, i, a.Namespace, a.Name, b.Namespace, b.Name)
		}
	}
	if again, _ := json.Marshal(&core); !bytes.Equal(again, body) {
		t.Fatalf("the streamed list is not the document json.Marshal gives:\n%.300s\n...%.300s", body, body[len(body)-300:])
	}

	_, _, body = e.get("/apis/events.k8s.io/v1/events", "application/json")
	var ev1 eventsv1.EventList
	if err := json.Unmarshal(body, &ev1); err != nil || len(ev1.Items) != n || ev1.Items[0].Note != strings.Repeat("m", 100) {
		t.Fatalf("events.k8s.io/v1 list: %v, %d items", err, len(ev1.Items))
	}
	if again, _ := json.Marshal(&ev1); !bytes.Equal(again, body) {
		t.Fatal("the streamed events.k8s.io/v1 list is not the document json.Marshal gives")
	}

	_, _, body = e.get("/api/v1/events", "application/json;as=Table;v=v1;g=meta.k8s.io")
	var tbl metav1.Table
	if err := json.Unmarshal(body, &tbl); err != nil || len(tbl.Rows) != n || len(tbl.ColumnDefinitions) == 0 {
		t.Fatalf("Table: %v, %d rows, %d columns", err, len(tbl.Rows), len(tbl.ColumnDefinitions))
	}

	// client-go's typed client asks for protobuf, or JSON.
	proto, err := kubernetes.NewForConfig(&rest.Config{Host: e.url, QPS: -1, ContentConfig: rest.ContentConfig{
		AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json", ContentType: "application/vnd.kubernetes.protobuf"}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := proto.CoreV1().Events("").List(e.ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != n {
		t.Fatalf("client-go list: %v, %v", err, l)
	}
	code, ct, body = e.get("/api/v1/events", "application/vnd.kubernetes.protobuf")
	if code != http.StatusOK || ct != "application/vnd.kubernetes.protobuf" || !bytes.HasPrefix(body, []byte("k8s\x00")) {
		t.Fatalf("protobuf-only list: %d %s", code, ct)
	}
}

// TestListStormIsBounded: 200 lists of every event (4,000 of 2 KiB)
// whose clients read nothing. Each is streamed, so it holds a page, not
// the whole list (which 1,000 such lists made 4.8 GB); they hold the
// readOnly slots (the others get 429), and creates are answered meanwhile.
func TestListStormIsBounded(t *testing.T) {
	const (
		slots  = 20
		lists  = 200
		stored = 4000
	)
	reg := prometheus.NewRegistry()
	var store storage.Interface
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		c.Registry, c.MaxRequestsInflight, store = reg, slots, c.Store
	})
	fill(t, e.ctx, store, stored, 2048)
	heap0 := heapInUse()
	e.unreadStorm(reg, "/api/v1/events", lists, slots)
	// Per list: a page decoded (256 events of about 3 KiB) and encoded
	// (about 2.5 KiB each), some 2 MiB at most, and the in-memory
	// store's own churn. Unstreamed, each list held its whole answer
	// (4,000 events, 10 MB) until its client read it: 200 MB here.
	grown := int64(heapInUse()) - int64(heap0)
	const limit = 100 << 20
	if grown > limit {
		t.Fatalf("the heap grew by %d MiB with %d lists in flight, want at most %d MiB", grown>>20, slots, limit>>20)
	}
	t.Logf("heap grew by %d MiB with %d lists in flight", grown>>20, slots)
}

// protobufList decodes a protobuf list answer into list (a
// corev1.EventList or eventsv1.EventList) and checks that it is the
// canonical encoding: the envelope runtime.Unknown's Marshal gives for
// the list's own Marshal.
func protobufList(t *testing.T, body []byte, list interface {
	Unmarshal([]byte) error
	Marshal() ([]byte, error)
}) runtime.TypeMeta {
	t.Helper()
	if !bytes.HasPrefix(body, []byte("k8s\x00")) {
		t.Fatalf("not a protobuf envelope: %.40q", body)
	}
	var u runtime.Unknown
	if err := u.Unmarshal(body[4:]); err != nil {
		t.Fatal(err)
	}
	if err := list.Unmarshal(u.Raw); err != nil {
		t.Fatal(err)
	}
	raw, err := list.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	canon, err := (&runtime.Unknown{TypeMeta: u.TypeMeta, Raw: raw}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append([]byte("k8s\x00"), canon...), body) {
		t.Fatal("the protobuf list is not the canonical encoding of what it holds")
	}
	return u.TypeMeta
}

// TestListOfEveryEventInProtobuf: a list without a limit of more events
// than a page, asked for in protobuf, is answered in protobuf (encoded a
// page at a time), whether or not the client accepts JSON too: the
// canonical encoding of the same list the JSON answer holds, in both
// groups, with its Content-Length, and client-go's protobuf clients
// decode it. Lists that would hold more than Config.ProtobufListBytes
// are streamed in JSON to clients that accept it, and still answered in
// protobuf to clients that accept nothing else; the bytes a list held
// are given back when it is answered.
func TestListOfEveryEventInProtobuf(t *testing.T) {
	const n = 700 // three pages
	var store storage.Interface
	limit := int64(server.DefaultProtobufListBytes)
	e := newEnvWith(t, time.Hour, func(c *server.Config) { store, c.ProtobufListBytes = c.Store, limit })
	fill(t, e.ctx, store, n, 100)
	const (
		protoOnly = "application/vnd.kubernetes.protobuf"
		protoJSON = "application/vnd.kubernetes.protobuf,application/json"
	)
	rv := fmt.Sprint(store.Revision())

	_, _, jsonCore := e.get("/api/v1/events", "application/json")
	_, _, jsonEv1 := e.get("/apis/events.k8s.io/v1/events", "application/json")
	for _, accept := range []string{protoOnly, protoJSON} {
		code, ct, body := e.get("/api/v1/events", accept)
		if code != http.StatusOK || ct != protoOnly {
			t.Fatalf("core/v1, Accept %s: %d %s", accept, code, ct)
		}
		var core corev1.EventList
		tm := protobufList(t, body, &core)
		if tm.APIVersion != "v1" || tm.Kind != "EventList" || len(core.Items) != n || core.ResourceVersion != rv || core.Continue != "" {
			t.Fatalf("core/v1, Accept %s: %+v, %d items at %q, continue %q; want %d at %s", accept, tm, len(core.Items), core.ResourceVersion, core.Continue, n, rv)
		}
		// The same list as the JSON answer (which sets the items' kind).
		core.TypeMeta = metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"}
		for i := range core.Items {
			core.Items[i].TypeMeta = metav1.TypeMeta{Kind: "Event", APIVersion: "v1"}
		}
		if j, _ := json.Marshal(&core); !bytes.Equal(j, jsonCore) {
			t.Fatalf("core/v1, Accept %s: the protobuf list holds other events than the JSON list", accept)
		}

		code, ct, body = e.get("/apis/events.k8s.io/v1/events", accept)
		if code != http.StatusOK || ct != protoOnly {
			t.Fatalf("events.k8s.io/v1, Accept %s: %d %s", accept, code, ct)
		}
		var ev1 eventsv1.EventList
		tm = protobufList(t, body, &ev1)
		if tm.APIVersion != "events.k8s.io/v1" || tm.Kind != "EventList" || len(ev1.Items) != n || ev1.ResourceVersion != rv {
			t.Fatalf("events.k8s.io/v1, Accept %s: %+v, %d items at %q", accept, tm, len(ev1.Items), ev1.ResourceVersion)
		}
		ev1.TypeMeta = metav1.TypeMeta{Kind: "EventList", APIVersion: "events.k8s.io/v1"}
		for i := range ev1.Items {
			ev1.Items[i].TypeMeta = metav1.TypeMeta{Kind: "Event", APIVersion: "events.k8s.io/v1"}
		}
		if j, _ := json.Marshal(&ev1); !bytes.Equal(j, jsonEv1) {
			t.Fatalf("events.k8s.io/v1, Accept %s: the protobuf list holds other events than the JSON list", accept)
		}

		// client-go's typed clients, in protobuf.
		cs, err := kubernetes.NewForConfig(&rest.Config{Host: e.url, QPS: -1, ContentConfig: rest.ContentConfig{
			AcceptContentTypes: accept, ContentType: protoOnly}})
		if err != nil {
			t.Fatal(err)
		}
		l, err := cs.CoreV1().Events("").List(e.ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != n || l.ResourceVersion != rv || l.Items[0].Message != strings.Repeat("m", 100) {
			t.Fatalf("client-go core/v1, Accept %s: %v, %d items", accept, err, len(l.Items))
		}
		l1, err := cs.EventsV1().Events("ns3").List(e.ctx, metav1.ListOptions{})
		if err != nil || len(l1.Items) != n/10 || l1.Items[0].Note != strings.Repeat("m", 100) {
			t.Fatalf("client-go events.k8s.io/v1 in ns3, Accept %s: %v, %d items", accept, err, len(l1.Items))
		}
	}

	// A list of one namespace (70 events) fits in a page: answered whole,
	// as before, in protobuf.
	if code, ct, _ := e.get("/api/v1/namespaces/ns1/events", protoJSON); code != http.StatusOK || ct != protoOnly {
		t.Fatalf("one page: %d %s", code, ct)
	}

	// The bytes a list held are given back: with room for one list at a
	// time, lists one after the other are all answered in protobuf.
	_, _, body := e.get("/api/v1/events", protoOnly)
	one := int64(len(body))
	small := newEnvWith(t, time.Hour, func(c *server.Config) { store, c.ProtobufListBytes = c.Store, 2*one })
	fill(t, small.ctx, store, n, 100)
	for i := range 5 {
		if code, ct, _ := small.get("/api/v1/events", protoJSON); code != http.StatusOK || ct != protoOnly {
			t.Fatalf("list %d with room for one: %d %s", i, code, ct)
		}
	}
	// Without room: JSON, streamed, to a client that accepts it; protobuf
	// to one that accepts only protobuf.
	none := newEnvWith(t, time.Hour, func(c *server.Config) { store, c.ProtobufListBytes = c.Store, one/2 })
	fill(t, none.ctx, store, n, 100)
	code, ct, body := none.get("/api/v1/events", protoJSON)
	var core corev1.EventList
	if err := json.Unmarshal(body, &core); code != http.StatusOK || ct != "application/json" || err != nil || len(core.Items) != n {
		t.Fatalf("without room, Accept %s: %d %s %v, %d items", protoJSON, code, ct, err, len(core.Items))
	}
	if again, _ := json.Marshal(&core); !bytes.Equal(again, body) {
		t.Fatal("without room: the streamed JSON list is not the document json.Marshal gives")
	}
	code, ct, body = none.get("/api/v1/events", protoOnly)
	if code != http.StatusOK || ct != protoOnly {
		t.Fatalf("without room, Accept %s: %d %s", protoOnly, code, ct)
	}
	core = corev1.EventList{}
	if protobufList(t, body, &core); len(core.Items) != n {
		t.Fatalf("without room, Accept %s: %d items", protoOnly, len(core.Items))
	}
}

// TestIndexedListInProtobuf: a list over several index lookups (here the
// regarding and related name indexes of involves.name) of more than a
// page, asked for in core/v1 protobuf, copies the store's encoding of
// each event (storage.ListResult.Protobuf) instead of encoding it: the
// answer is still the canonical encoding of the same events the JSON
// answer holds, with managedFields, labels, series and related objects,
// after some events' updates, and client-go decodes it; the
// events.k8s.io/v1 answer (converted, not copied) holds the same events.
func TestIndexedListInProtobuf(t *testing.T) {
	var store storage.Interface
	e := newEnvWith(t, time.Hour, func(c *server.Config) { store = c.Store })
	const n = 600
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var made []*corev1.Event
	for i := range n + 50 {
		pod := "web"
		if i >= n {
			pod = fmt.Sprintf("other-%d", i) // not in the list
		}
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("%s.%05d", pod, i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: pod, Namespace: "shop", UID: "uid-web"},
			Reason:         "Started", Message: strings.Repeat("m", i%300), Type: corev1.EventTypeNormal, FirstTimestamp: at, LastTimestamp: at}
		switch i % 4 {
		case 1:
			ev.Labels = map[string]string{"app": "web"}
			ev.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:message":{}}`)}}}
		case 2:
			ev.EventTime = metav1.NewMicroTime(at.Time)
			ev.Series = &corev1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(at.Time)}
			ev.ReportingController, ev.ReportingInstance, ev.Action = "kubelet", "node-1", "Start"
		case 3:
			ev.Related = &corev1.ObjectReference{Kind: "Node", Name: "node-1"}
		}
		stored, err := store.Create(e.ctx, ev, storage.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, stored)
	}
	for i := 0; i < n; i += 7 { // new revisions
		ev := made[i].DeepCopy()
		ev.Count = 2
		if _, err := store.Update(e.ctx, ev, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const path = "/api/v1/namespaces/shop/events?fieldSelector=involves.name%3Dweb"
	_, _, jsonCore := e.get(path, "application/json")
	for range 2 { // the second from the store's decoded events
		code, ct, body := e.get(path, "application/vnd.kubernetes.protobuf")
		if code != http.StatusOK || ct != "application/vnd.kubernetes.protobuf" {
			t.Fatalf("%d %s", code, ct)
		}
		var core corev1.EventList
		protobufList(t, body, &core)
		if len(core.Items) != n {
			t.Fatalf("%d items, want %d", len(core.Items), n)
		}
		core.TypeMeta = metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"}
		for i := range core.Items {
			core.Items[i].TypeMeta = metav1.TypeMeta{Kind: "Event", APIVersion: "v1"}
		}
		if j, _ := json.Marshal(&core); !bytes.Equal(j, jsonCore) {
			t.Fatal("the protobuf list holds other events than the JSON list")
		}
	}
	code, _, body := e.get("/apis/events.k8s.io/v1/namespaces/shop/events?fieldSelector=involves.name%3Dweb", "application/vnd.kubernetes.protobuf")
	var ev1 eventsv1.EventList
	if protobufList(t, body, &ev1); code != http.StatusOK || len(ev1.Items) != n || ev1.Items[1].ManagedFields == nil {
		t.Fatalf("events.k8s.io/v1: %d, %d items", code, len(ev1.Items))
	}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: e.url, QPS: -1, ContentConfig: rest.ContentConfig{
		AcceptContentTypes: "application/vnd.kubernetes.protobuf", ContentType: "application/vnd.kubernetes.protobuf"}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := cs.CoreV1().Events("shop").List(e.ctx, metav1.ListOptions{FieldSelector: "involves.name=web"})
	if err != nil || len(l.Items) != n || l.Items[7].Count != 2 || l.Items[2].Series == nil || l.Items[3].Related == nil {
		t.Fatalf("client-go: %v, %d items", err, len(l.Items))
	}

	// A store wrapper that passes on copies of the events (as a cluster's
	// view does, renaming namespaces) and the rest of the result as it
	// is: the answer holds its copies, not the store's encodings.
	w := newEnvWith(t, time.Hour, func(c *server.Config) { store, c.Store = c.Store, copying{c.Store} })
	for _, ev := range made[:300] {
		ev := ev.DeepCopy()
		ev.ResourceVersion = ""
		if _, err := store.Create(w.ctx, ev, storage.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	code, _, body = w.get(path, "application/vnd.kubernetes.protobuf")
	var copies corev1.EventList
	if protobufList(t, body, &copies); code != http.StatusOK || len(copies.Items) != 300 {
		t.Fatalf("through a copying wrapper: %d, %d items", code, len(copies.Items))
	}
	for _, ev := range copies.Items {
		if ev.Annotations["copied"] != "yes" {
			t.Fatalf("through a copying wrapper: %s is the store's encoding, not the wrapper's copy", ev.Name)
		}
	}
}

// copying is a store whose lists pass on copies of the events,
// annotated, and the rest of the result (Protobuf included) as it is.
type copying struct{ storage.Interface }

func (c copying) List(ctx context.Context, opts storage.ListOptions) (*storage.ListResult, error) {
	res, err := c.Interface.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	cp := *res
	cp.Items = make([]*corev1.Event, len(res.Items))
	for i, ev := range res.Items {
		ev = ev.DeepCopy()
		metav1.SetMetaDataAnnotation(&ev.ObjectMeta, "copied", "yes")
		cp.Items[i] = ev
	}
	return &cp, nil
}
