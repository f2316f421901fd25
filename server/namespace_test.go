package server_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNamespaceGet: GET /api/v1/namespaces/NAME, which kubectl sends
// after a 404 for an object outside the default namespace, answers an
// Active Namespace for any valid name (events may be written to any
// namespace), through client-go's typed client (protobuf) and as JSON;
// a name no namespace can have gets kube-apiserver's 404; other methods
// and the namespace list stay unserved.
func TestNamespaceGet(t *testing.T) {
	e := newEnv(t, time.Hour)
	ns, err := e.cs.CoreV1().Namespaces().Get(e.ctx, "team-a", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("typed get of namespace team-a: %v", err)
	}
	if ns.Name != "team-a" || ns.Status.Phase != corev1.NamespaceActive || ns.Labels[corev1.LabelMetadataName] != "team-a" {
		t.Errorf("namespace team-a: %+v", ns)
	}

	code, body := e.do(http.MethodGet, "/api/v1/namespaces/kube-system", "", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", "")
	var got map[string]any
	if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil || got["kind"] != "Namespace" || got["apiVersion"] != "v1" {
		t.Fatalf("GET namespace kube-system asking for a Table or JSON: %d %s", code, body)
	}

	_, err = e.cs.CoreV1().Namespaces().Get(e.ctx, "Not_A_Namespace", metav1.GetOptions{})
	var se *apierrors.StatusError
	if !apierrors.IsNotFound(err) || !errors.As(err, &se) || se.ErrStatus.Message != `namespaces "Not_A_Namespace" not found` ||
		se.ErrStatus.Details == nil || se.ErrStatus.Details.Kind != "namespaces" {
		t.Errorf("get of an invalid namespace name: %v, want kube-apiserver's 404", err)
	}

	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1/namespaces"},
		{http.MethodDelete, "/api/v1/namespaces/team-a"},
		{http.MethodGet, "/api/v1/namespaces/team-a/pods"},
	} {
		if code, body := e.do(c.method, c.path, "", "", ""); code != http.StatusNotFound {
			t.Errorf("%s %s: %d %s, want 404", c.method, c.path, code, body)
		}
	}
}
