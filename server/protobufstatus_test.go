package server_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

const protobufType = "application/vnd.kubernetes.protobuf"

// TestProtobufStatusAndMetadata: clients that prefer protobuf get Status
// answers (errors and delete) and PartialObjectMetadata(List) in protobuf,
// as from kube-apiserver; client-go decodes their reasons, and the
// metadata client reads events.
func TestProtobufStatusAndMetadata(t *testing.T) {
	e := newEnv(t, time.Hour)
	e.create("a")
	cfg := &rest.Config{Host: e.url, QPS: -1, ContentConfig: rest.ContentConfig{
		ContentType: protobufType, AcceptContentTypes: protobufType + ",application/json"}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	events := cs.CoreV1().Events("default")
	if _, err := events.Get(e.ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) || apierrors.ReasonForError(err) != metav1.StatusReasonNotFound ||
		err.Error() != `events "missing" not found` {
		t.Fatalf("get missing: %v, want 404 NotFound decoded", err)
	}
	a, err := events.Get(e.ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.ResourceVersion = ""
	if _, err := events.Create(e.ctx, a, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create existing: %v, want 409 AlreadyExists decoded", err)
	}

	// On the wire: protobuf Status for an error and for a delete.
	for _, tc := range []struct{ method, path, reason string }{
		{http.MethodGet, "/api/v1/namespaces/default/events/missing", "NotFound"},
		{http.MethodPost, "/api/v1/namespaces/default/events/a", "MethodNotAllowed"},
		{http.MethodDelete, "/api/v1/namespaces/default/events/a", ""},
	} {
		req, _ := http.NewRequestWithContext(e.ctx, tc.method, e.url+tc.path, nil)
		req.Header.Set("Accept", protobufType+",application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != protobufType || !strings.HasPrefix(body.String(), "k8s\x00") {
			t.Fatalf("%s %s: content type %q", tc.method, tc.path, ct)
		}
		var u runtime.Unknown
		if err := u.Unmarshal([]byte(body.String()[4:])); err != nil {
			t.Fatal(err)
		}
		var st metav1.Status
		if err := st.Unmarshal(u.Raw); err != nil || u.Kind != "Status" || string(st.Reason) != tc.reason {
			t.Fatalf("%s %s: %s %+v (%v), want Status with reason %q", tc.method, tc.path, u.Kind, st, err, tc.reason)
		}
	}

	e.create("b")
	mc, err := metadata.NewForConfig(&rest.Config{Host: e.url, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	mev := mc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "events"}).Namespace("default")
	m, err := mev.Get(e.ctx, "b", metav1.GetOptions{})
	if err != nil || m.Name != "b" || m.UID == "" {
		t.Fatalf("metadata get: %+v %v", m, err)
	}
	l, err := mev.List(e.ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "b" || l.ResourceVersion == "" {
		t.Fatalf("metadata list: %+v %v", l, err)
	}
	if _, err := mev.Get(e.ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("metadata get missing: %v, want 404", err)
	}
	// Only protobuf metadata accepted: 200 in protobuf, not 406.
	code, body := e.do(http.MethodGet, "/api/v1/namespaces/default/events/b", "", protobufType+";as=PartialObjectMetadata;g=meta.k8s.io;v=v1", "")
	if code != http.StatusOK || !strings.HasPrefix(body, "k8s\x00") || !strings.Contains(body, "PartialObjectMetadata") {
		t.Fatalf("protobuf-only metadata: %d %q", code, body[:min(len(body), 60)])
	}
}
