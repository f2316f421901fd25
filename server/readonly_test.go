package server_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/server/healthz"

	"github.com/kubevents/kubevents/server"
)

// TestReadOnly: a read-only server (eventsd mirroring a cluster) refuses
// every write of both groups with 405 and its message, changes nothing,
// serves reads, and lists only get, list and watch in discovery, so that
// kubectl knows before it tries.
func TestReadOnly(t *testing.T) {
	const msg = "eventsd mirrors the events of the cluster of context \"prod\": they are read-only here"
	e := newEnvWith(t, time.Hour, func(c *server.Config) { c.ReadOnly = msg })
	events := e.cs.CoreV1().Events("default")
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "a"}, InvolvedObject: corev1.ObjectReference{Namespace: "default"}, Reason: "Started"}
	check := func(what string, err error) {
		t.Helper()
		if !apierrors.IsMethodNotSupported(err) || !strings.Contains(err.Error(), msg) {
			t.Fatalf("%s: %v, want 405 with the read-only message", what, err)
		}
	}
	_, err := events.Create(e.ctx, ev, metav1.CreateOptions{})
	check("create", err)
	_, err = events.Update(e.ctx, ev, metav1.UpdateOptions{})
	check("update", err)
	_, err = events.Patch(e.ctx, "a", types.MergePatchType, []byte(`{"reason":"x"}`), metav1.PatchOptions{})
	check("patch", err)
	check("delete", events.Delete(e.ctx, "a", metav1.DeleteOptions{}))
	check("deletecollection", events.DeleteCollection(e.ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	_, err = e.cs.EventsV1().Events("default").Create(e.ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "b"}, EventTime: metav1.NowMicro(),
		ReportingController: "c", ReportingInstance: "i", Action: "Do", Reason: "Done", Type: "Normal"}, metav1.CreateOptions{})
	check("events.k8s.io create", err)
	if l, err := events.List(e.ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Fatalf("list: %v %v", l, err)
	}
	res, err := e.cs.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.APIResources {
		if r.Name == "events" && strings.Join(r.Verbs, ",") != "get,list,watch" {
			t.Fatalf("discovery verbs of events: %v", r.Verbs)
		}
	}
}

// TestReadyzChecks: a failing ready check (a mirror behind its source)
// fails /readyz with its name, unless excluded; ?verbose lists them all.
func TestReadyzChecks(t *testing.T) {
	failing := healthz.NamedCheck("mirror", func(*http.Request) error { return errors.New("behind its source") })
	e := newEnvWith(t, time.Hour, func(c *server.Config) { c.ReadyChecks = []healthz.HealthChecker{failing} })
	for _, tc := range []struct {
		query string
		code  int
		body  string
	}{
		{"", http.StatusServiceUnavailable, "mirror: behind its source\n"},
		{"?exclude=mirror", http.StatusOK, "ok"},
		{"?verbose", http.StatusServiceUnavailable, "[+]shutdown ok\n[+]storage ok\n[-]mirror failed: behind its source\nreadyz check failed\n"},
		{"?verbose&exclude=mirror", http.StatusOK, "[+]shutdown ok\n[+]storage ok\n[+]mirror excluded: ok\nreadyz check passed\n"},
	} {
		code, _, body := e.get("/readyz"+tc.query, "")
		if code != tc.code || string(body) != tc.body {
			t.Errorf("/readyz%s: %d %q, want %d %q", tc.query, code, body, tc.code, tc.body)
		}
	}
}

// TestInstanceHeader: every answer carries Config.InstanceID in
// InstanceHeader, a refusal of authentication and a 404 included, so
// that eventsd's mirror can tell it is asking itself; without an id,
// none.
func TestInstanceHeader(t *testing.T) {
	const id = "0123456789abcdef"
	e := newEnvWith(t, time.Hour, func(c *server.Config) {
		c.InstanceID = id
		c.Authenticator = authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
			if r.Header.Get("Authorization") != "Bearer good" {
				return nil, false, nil
			}
			return &authenticator.Response{User: &user.DefaultInfo{Name: "u", Groups: []string{user.SystemPrivilegedGroup}}}, true, nil
		})
	})
	for _, c := range []struct {
		path, token string
		code        int
	}{
		{"/api/v1/events?limit=1", "good", http.StatusOK},
		{"/api/v1/events?limit=1", "", http.StatusUnauthorized},
		{"/nothing-here", "good", http.StatusNotFound},
	} {
		req, err := http.NewRequest(http.MethodGet, e.url+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.code || resp.Header.Get(server.InstanceHeader) != id {
			t.Errorf("%s (token %q): %d with %s %q; want %d with %q", c.path, c.token, resp.StatusCode, server.InstanceHeader, resp.Header.Get(server.InstanceHeader), c.code, id)
		}
	}
	plain := newEnv(t, time.Hour)
	resp, err := http.Get(plain.url + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v, ok := resp.Header[server.InstanceHeader]; ok {
		t.Errorf("without an InstanceID: %s %q", server.InstanceHeader, v)
	}
}
