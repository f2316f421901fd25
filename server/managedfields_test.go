package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// entryOf returns the managedFields entry of manager, failing without one.
func entryOf(t *testing.T, what string, m []metav1.ManagedFieldsEntry, manager string) metav1.ManagedFieldsEntry {
	t.Helper()
	for _, e := range m {
		if e.Manager == manager {
			return e
		}
	}
	t.Fatalf("%s: no managedFields entry of %q in %+v", what, manager, m)
	return metav1.ManagedFieldsEntry{}
}

// fieldKeys are the top-level keys of an entry's fieldsV1, sorted.
func fieldKeys(t *testing.T, e metav1.ManagedFieldsEntry) []string {
	t.Helper()
	var m map[string]any
	if e.FieldsV1 == nil || json.Unmarshal(e.FieldsV1.Raw, &m) != nil {
		t.Fatalf("entry %+v has no fieldsV1", e)
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestManagedFields: through client-go (protobuf), creates, updates and
// merge and strategic-merge patches of both groups keep managedFields
// as kube-apiserver does: the manager from fieldManager or else the
// User-Agent's product, operation Update, the API version written
// through, the fields each one set or changed, kept across writes of
// clients that do not send them, and stored (a get shows the same).
func TestManagedFields(t *testing.T) {
	e := newEnv(t, time.Hour)
	events, newEvents := e.cs.CoreV1().Events("default"), e.cs.EventsV1().Events("default")
	now := metav1.NewTime(time.Now().Truncate(time.Second))

	created, err := events.Create(e.ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "legacy"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"}, Reason: "Started", Message: "one",
		Type: corev1.EventTypeNormal, Count: 1, FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "kubelet"}},
		metav1.CreateOptions{FieldManager: "creator"})
	if err != nil {
		t.Fatal(err)
	}
	c := entryOf(t, "core create", created.ManagedFields, "creator")
	if c.Operation != metav1.ManagedFieldsOperationUpdate || c.APIVersion != "v1" || c.FieldsType != "FieldsV1" || c.Time == nil ||
		time.Since(c.Time.Time) > time.Minute || len(created.ManagedFields) != 1 {
		t.Fatalf("core create's managedFields: %+v", created.ManagedFields)
	}
	if got, want := fieldKeys(t, c), []string{"f:count", "f:firstTimestamp", "f:involvedObject", "f:lastTimestamp", "f:message", "f:reason", "f:source", "f:type"}; !slices.Equal(got, want) {
		t.Errorf("core create's fields %v, want %v", got, want)
	}

	// The legacy recorder's count patch, strategic merge, no fieldManager:
	// the manager is client-go's User-Agent product.
	patched, err := events.Patch(e.ctx, "legacy", types.StrategicMergePatchType,
		[]byte(`{"count":2,"lastTimestamp":"`+now.Add(time.Minute).UTC().Format(time.RFC3339)+`","message":"two"}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(patched.ManagedFields) != 2 {
		t.Fatalf("after the count patch: %+v, want the creator's and the patcher's", patched.ManagedFields)
	}
	var patcher metav1.ManagedFieldsEntry
	for _, m := range patched.ManagedFields {
		if m.Manager != "creator" {
			patcher = m
		}
	}
	if patcher.Manager == "" || strings.ContainsAny(patcher.Manager, "/ ") || patcher.APIVersion != "v1" ||
		!slices.Equal(fieldKeys(t, patcher), []string{"f:count", "f:lastTimestamp", "f:message"}) {
		t.Errorf("the count patch's entry: %+v %s", patcher, patcher.FieldsV1.Raw)
	}
	if got := fieldKeys(t, entryOf(t, "after the count patch", patched.ManagedFields, "creator")); slices.Contains(got, "f:count") || !slices.Contains(got, "f:reason") {
		t.Errorf("the creator keeps %v after the count patch, want its fields but the patched ones", got)
	}

	// A merge patch through events.k8s.io/v1 by a named manager.
	np, err := newEvents.Patch(e.ctx, "legacy", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"web"}}}`), metav1.PatchOptions{FieldManager: "labeller"})
	if err != nil {
		t.Fatal(err)
	}
	l := entryOf(t, "events.k8s.io merge patch", np.ManagedFields, "labeller")
	if l.APIVersion != "events.k8s.io/v1" || !slices.Equal(fieldKeys(t, l), []string{"f:metadata"}) || !strings.Contains(string(l.FieldsV1.Raw), `"f:app"`) {
		t.Errorf("the label patch's entry: %+v %s", l, l.FieldsV1.Raw)
	}

	// An update that drops managedFields keeps the stored ones.
	cur, err := events.Get(e.ctx, "legacy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !equalEntries(cur.ManagedFields, np.ManagedFields) {
		t.Errorf("stored managedFields %+v, the patch answered %+v", cur.ManagedFields, np.ManagedFields)
	}
	cur.ManagedFields = nil
	cur.Reason = "Restarted"
	up, err := events.Update(e.ctx, cur, metav1.UpdateOptions{FieldManager: "updater"})
	if err != nil {
		t.Fatal(err)
	}
	if len(up.ManagedFields) != 4 || !slices.Equal(fieldKeys(t, entryOf(t, "update", up.ManagedFields, "updater")), []string{"f:reason"}) {
		t.Errorf("after an update without managedFields: %+v", up.ManagedFields)
	}

	// events.k8s.io/v1 create.
	ne, err := newEvents.Create(e.ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "new"}, EventTime: metav1.NewMicroTime(now.Time),
		ReportingController: "ctrl", ReportingInstance: "ctrl-1", Action: "Start", Reason: "Started", Type: corev1.EventTypeNormal, Note: "n",
		Regarding: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"}}, metav1.CreateOptions{FieldManager: "ctrl"})
	if err != nil {
		t.Fatal(err)
	}
	n := entryOf(t, "events.k8s.io create", ne.ManagedFields, "ctrl")
	if want := []string{"f:action", "f:eventTime", "f:note", "f:reason", "f:regarding", "f:reportingController", "f:reportingInstance", "f:type"}; n.APIVersion != "events.k8s.io/v1" || !slices.Equal(fieldKeys(t, n), want) {
		t.Errorf("events.k8s.io create's entry %+v: fields %v, want %v", n, fieldKeys(t, n), want)
	}
	// Read through core/v1, the entry keeps its version.
	if core, err := events.Get(e.ctx, "new", metav1.GetOptions{}); err != nil || !equalEntries(core.ManagedFields, ne.ManagedFields) {
		t.Errorf("the events.k8s.io event read through core/v1: %v %+v", err, core)
	}

	// No fieldManager, no product in the User-Agent's place: the manager
	// is the User-Agent's product.
	code, body := e.doUA(http.MethodPost, "/api/v1/namespaces/default/events", "application/json", "my-controller/1.2 (linux/amd64)",
		`{"metadata":{"name":"ua"},"involvedObject":{"kind":"Pod","name":"web","namespace":"default"},"reason":"Started"}`)
	var ua corev1.Event
	if err := json.Unmarshal([]byte(body), &ua); code != http.StatusCreated || err != nil || len(ua.ManagedFields) != 1 || ua.ManagedFields[0].Manager != "my-controller" {
		t.Errorf("create with User-Agent my-controller/1.2: %d %s", code, body)
	}
}

// equalEntries compares managedFields as stored (times to the second).
func equalEntries(a, b []metav1.ManagedFieldsEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Manager != y.Manager || x.Operation != y.Operation || x.APIVersion != y.APIVersion || string(x.FieldsV1.Raw) != string(y.FieldsV1.Raw) ||
			x.Time.Unix() != y.Time.Unix() {
			return false
		}
	}
	return true
}

// TestFieldManagerValidation: kube-apiserver's checks of fieldManager
// (at most 128 bytes, printable characters) and force (apply only): 422
// naming the field, nothing stored.
func TestFieldManagerValidation(t *testing.T) {
	e := newEnv(t, time.Hour)
	body := `{"metadata":{"name":"x"},"involvedObject":{"kind":"Pod","name":"web","namespace":"default"},"reason":"Started"}`
	long := strings.Repeat("m", 129)
	for _, c := range []struct {
		what, method, path, ct, body, cause string
	}{
		{"create, 129 bytes", http.MethodPost, "/api/v1/namespaces/default/events?fieldManager=" + long, "application/json", body, "fieldManager: Too long: may not be more than 128 bytes"},
		{"create, a control character", http.MethodPost, "/apis/events.k8s.io/v1/namespaces/default/events?fieldManager=a%01b", "application/json", body, `fieldManager: Invalid value: "a\x01b": invalid character U+0001 (at position 1)`},
		{"update", http.MethodPut, "/api/v1/namespaces/default/events/x?fieldManager=" + long, "application/json", body, "fieldManager: Too long"},
		{"patch with force", http.MethodPatch, "/api/v1/namespaces/default/events/x?force=true", "application/merge-patch+json", `{}`, "force: Forbidden: may not be specified for non-apply patch"},
		{"apply without fieldManager", http.MethodPatch, "/api/v1/namespaces/default/events/x", "application/apply-patch+yaml", "{}", "fieldManager: Required value: is required for apply patch"},
	} {
		code, resp := e.do(c.method, c.path, c.ct, "", c.body)
		var st metav1.Status
		_ = json.Unmarshal([]byte(resp), &st)
		if code != http.StatusUnprocessableEntity || st.Reason != metav1.StatusReasonInvalid || !strings.Contains(st.Message, c.cause) {
			t.Errorf("%s: %d %s, want 422 with %q", c.what, code, resp, c.cause)
		}
	}
	if _, err := e.cs.CoreV1().Events("default").Get(e.ctx, "x", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the refused writes: %v, want NotFound", err)
	}
	// 128 printable bytes are accepted.
	if code, resp := e.do(http.MethodPost, "/api/v1/namespaces/default/events?fieldManager="+long[:128], "application/json", "", body); code != http.StatusCreated ||
		!strings.Contains(resp, `"manager":"`+long[:128]+`"`) {
		t.Errorf("create with a 128-byte fieldManager: %d %s", code, resp)
	}
}

// doUA is do with a User-Agent.
func (e *env) doUA(method, path, contentType, userAgent, body string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", userAgent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
