package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	clientevents "k8s.io/client-go/tools/events"
	clientrecord "k8s.io/client-go/tools/record"

	"github.com/kubevents/kubevents/evctl"
	"github.com/kubevents/kubevents/events"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/syncbuf"
)

// evctlRun runs evctl in process against url and returns its output.
func evctlRun(t *testing.T, url string, args ...string) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := evctl.NewCommand(&out, &errOut)
	cmd.SetArgs(append([]string{"--server", url}, args...))
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("evctl %v: %v\n%s", args, err, errOut.String())
	}
	return out.String(), errOut.String()
}

// evctlWrite writes the fixture through the recorders users have: the
// kubelet's legacy recorder (client-go tools/record), a scheduler on
// client-go's events recorder, and a controller on this project's.
func evctlWrite(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "web-uid"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid"}}

	cg := clientevents.NewBroadcaster(&clientevents.EventSinkImpl{Interface: cs.EventsV1()})
	cgctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := cg.StartRecordingToSinkWithContext(cgctx); err != nil {
		t.Fatal(err)
	}
	cg.NewRecorder(scheme.Scheme, "node-controller").Eventf(node, nil, corev1.EventTypeNormal, "NodeReady", "Check", "node-1 is ready")
	evctlWait(t, cs, 1)

	ours := events.NewBroadcaster(&clientevents.EventSinkImpl{Interface: cs.EventsV1()}, events.WithHostname("h"))
	if err := ours.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		ours.NewRecorder(scheme.Scheme, "example.com/scheduler").Eventf(web, node, corev1.EventTypeNormal, "Scheduled", "Binding", "assigned default/web to node-1")
	}
	ours.Shutdown()
	evctlWait(t, cs, 2)

	legacy := clientrecord.NewBroadcaster()
	legacy.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	rec := legacy.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "node-1"})
	for i := 0; i < 5; i++ {
		rec.Event(web, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		l, _ := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=BackOff"})
		if len(l.Items) == 1 && l.Items[0].Count == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the legacy recorder's count did not reach 5: %+v", l.Items)
		}
		time.Sleep(20 * time.Millisecond)
	}
	legacy.Shutdown()
	cg.Shutdown()
}

func evctlWait(t *testing.T, cs kubernetes.Interface, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		l, err := cs.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err == nil && len(l.Items) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited for %d events", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// evctlLines returns the lines of out that contain s.
func evctlLines(out, s string) []string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			got = append(got, l)
		}
	}
	return got
}

// TestEvctl: get and timeline against eventsd with its extensions, and
// against eventsd with them switched off (as any other API server), give
// the same answers.
func TestEvctl(t *testing.T) {
	t.Parallel()
	var timelines [2][]string
	for i, ext := range []bool{true, false} {
		p := eventsdtest.Start(t, eventsdtest.Options{Args: []string{fmt.Sprintf("--extensions=%v", ext)}})
		evctlWrite(t, p.Clientset())
		url := p.URL

		out, _ := evctlRun(t, url, "get", "--for", "pod/web")
		if l := evctlLines(out, "BackOff"); len(l) != 1 || !strings.Contains(l[0], "(x5 over") || !strings.Contains(l[0], "Pod/web") {
			t.Errorf("ext=%v get --for pod/web, BackOff: %q\n%s", ext, l, out)
		}
		if l := evctlLines(out, "Scheduled"); len(l) != 1 || !strings.Contains(l[0], "(x3 over") || !strings.Contains(l[0], ", unknown)") { // its recorder shut down
			t.Errorf("ext=%v get --for pod/web, Scheduled: %q\n%s", ext, l, out)
		}
		if strings.Contains(out, "NodeReady") {
			t.Errorf("ext=%v: an event about the node in pod/web's list:\n%s", ext, out)
		}

		for _, c := range []struct{ flag, value, want string }{
			{"--action", "Binding", "Scheduled"},
			{"--instance", "example.com/scheduler-h", "Scheduled"},
			{"--controller", "kubelet", "BackOff"},
			{"--type", "warning", "BackOff"},
		} {
			out, _ := evctlRun(t, url, "get", c.flag, c.value)
			if got := strings.Count(out, "\n"); got != 2 || !strings.Contains(out, c.want) {
				t.Errorf("ext=%v get %s %s: want the header and one %s row:\n%s", ext, c.flag, c.value, c.want, out)
			}
		}
		out, errOut := evctlRun(t, url, "get", "--reason", "Nothing")
		if out != "" || !strings.Contains(errOut, "No events found in default namespace.") {
			t.Errorf("ext=%v empty get: %q %q", ext, out, errOut)
		}
		var unknownOut, unknownErr bytes.Buffer
		unknown := evctl.NewCommand(&unknownOut, &unknownErr)
		unknown.SetArgs([]string{"--server", url, "--request-timeout=10s", "get", "--for", "gadget/g-1"})
		if err := unknown.ExecuteContext(context.Background()); err == nil || err.Error() != `the server doesn't have a resource type "gadget"` {
			t.Errorf("ext=%v get --for gadget/g-1: %v, want kubectl's message for an unknown kind", ext, err)
		}
		out, _ = evctlRun(t, url, "get", "-A", "-o", "json")
		var l eventsv1.EventList
		if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Items) != 3 {
			t.Errorf("ext=%v get -o json: %v, %d items", ext, err, len(l.Items))
		}

		// The node's timeline, alone: its own event, then the pod's
		// scheduling where it is the related object, in time order.
		out, _ = evctlRun(t, url, "timeline", "node/node-1", "--family=false")
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			f := strings.Fields(line)
			timelines[i] = append(timelines[i], strings.Join(f[2:], " "))
		}
		if len(timelines[i]) != 2 || !strings.Contains(timelines[i][0], "NodeReady regarding Node/node-1") ||
			!strings.Contains(timelines[i][1], "x3 unknown Normal Scheduled related Pod/web") {
			t.Errorf("ext=%v timeline node/node-1:\n%s", ext, out)
		}
	}
	if strings.Join(timelines[0], "\n") != strings.Join(timelines[1], "\n") {
		t.Errorf("with and without extensions the timelines differ:\n%q\n%q", timelines[0], timelines[1])
	}
}

// TestEvctlCertificateAuthority: evctl verifies an eventsd serving HTTPS
// with a CA of its own given with --certificate-authority (as
// docs/install.md reads the chart's generated certificate), at 127.0.0.1
// and localhost, and refuses the certificate without it.
func TestEvctlCertificateAuthority(t *testing.T) {
	t.Parallel()
	certFile, keyFile, caPEM := cgServingCert(t, "localhost")
	p := eventsdtest.Start(t, eventsdtest.Options{Args: []string{"--tls-cert-file", certFile, "--tls-private-key-file", keyFile}})
	e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web-1.a", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-1"}, Reason: "Started", Type: corev1.EventTypeNormal}
	if _, err := p.Clientset().CoreV1().Events("default").Create(context.Background(), e, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(p.Addr, ":")
	for _, url := range []string{p.URL, "https://localhost:" + port} {
		out, _ := evctlRun(t, url, "--certificate-authority", caFile, "get", "-A")
		if !strings.Contains(out, "Pod/web-1") {
			t.Errorf("evctl --server %s --certificate-authority: %q, want web-1's event", url, out)
		}
	}
	var out, errOut bytes.Buffer
	cmd := evctl.NewCommand(&out, &errOut)
	cmd.SetArgs([]string{"--server", p.URL, "get", "-A"})
	if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error()+errOut.String(), "certificate") {
		t.Errorf("evctl without the CA: %v, %s; want a certificate error", err, errOut.String())
	}
}

// TestEvctlWatchSurvivesRestart: evctl watch keeps printing across a
// kill -9 and restart of eventsd, resuming from the last resourceVersion:
// every change once, none twice, none missing.
func TestEvctlWatchSurvivesRestart(t *testing.T) {
	t.Parallel()
	p := eventsdtest.Start(t, eventsdtest.Options{})
	cs := p.Clientset()
	ctx := context.Background()
	create := func(i int) {
		t.Helper()
		_, err := cs.CoreV1().Events("default").Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("step-%d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default", UID: types.UID("web-uid")},
			Reason:         "Step", Message: fmt.Sprintf("step %d happened", i), Type: "Normal", Count: 1,
			FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	create(0)
	out := &syncbuf.Buffer{}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		cmd := evctl.NewCommand(out, out)
		cmd.SetArgs([]string{"--server", p.URL, "watch", "--reason", "Step"})
		done <- cmd.ExecuteContext(wctx)
	}()
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok(out.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("evctl watch did not print %s:\n%s", what, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	has := func(msgs ...string) func(string) bool {
		return func(s string) bool {
			for _, m := range msgs {
				if !strings.Contains(s, m) {
					return false
				}
			}
			return true
		}
	}
	waitFor("the existing event", has("step 0 happened"))
	create(1)
	create(2)
	waitFor("live events", has("step 1 happened", "step 2 happened"))

	p.Kill()
	p.Restart()
	create(3)
	if _, err := cs.CoreV1().Events("default").Patch(ctx, "step-1", types.StrategicMergePatchType,
		[]byte(`{"count":2,"message":"step 1 happened again"}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	create(4)
	waitFor("the events after the restart", has("step 3 happened", "step 1 happened again", "step 4 happened"))
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, m := range []string{"step 0 happened", "step 2 happened", "step 3 happened", "step 4 happened", "step 1 happened again"} {
		if n := strings.Count(got, m); n != 1 {
			t.Errorf("%q printed %d times, want once:\n%s", m, n, got)
		}
	}
	if n := strings.Count(got, "step 1 happened\n"); n != 1 {
		t.Errorf("step 1's first state printed %d times:\n%s", n, got)
	}
	if strings.Count(got, "LAST SEEN") != 1 {
		t.Errorf("the header should be printed once:\n%s", got)
	}
}

// TestEvctlTimelineWatch: a live timeline picks up new events where the
// object is the related one, with and without eventsd's extensions.
func TestEvctlTimelineWatch(t *testing.T) {
	t.Parallel()
	for _, ext := range []bool{true, false} {
		p := eventsdtest.Start(t, eventsdtest.Options{Args: []string{fmt.Sprintf("--extensions=%v", ext)}})
		cs := p.Clientset()
		ctx := context.Background()
		mk := func(name, reason string, regarding corev1.ObjectReference, related *corev1.ObjectReference) {
			t.Helper()
			_, err := cs.CoreV1().Events("default").Create(ctx, &corev1.Event{
				ObjectMeta: metav1.ObjectMeta{Name: name}, InvolvedObject: regarding, Related: related,
				Reason: reason, Message: name, Type: "Normal", Count: 1, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
		node := corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "node-1"}
		pod := func(n string) corev1.ObjectReference {
			return corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: n}
		}
		mk("node-ready", "NodeReady", node, nil)
		out := &syncbuf.Buffer{}
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			cmd := evctl.NewCommand(out, out)
			cmd.SetArgs([]string{"--server", p.URL, "timeline", "node/node-1", "--family=false", "--watch"})
			done <- cmd.ExecuteContext(wctx)
		}()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(out.String(), "node-ready") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		mk("unrelated", "Pulled", pod("db"), nil)
		mk("scheduled-web", "Scheduled", pod("web"), &node)
		for !strings.Contains(out.String(), "scheduled-web") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := out.String()
		if l := evctlLines(got, "scheduled-web"); len(l) != 1 || !strings.Contains(l[0], "related") ||
			strings.Contains(got, "unrelated") || len(evctlLines(got, "node-ready")) != 1 {
			t.Errorf("ext=%v live timeline:\n%s", ext, got)
		}
	}
}

// TestEvctlEscapedNames: objects and reasons whose values hold a field
// selector's separators ("," "=" "\") are one escaped value in evctl's
// selectors, with and without eventsd's extensions: "a=b" is found (not
// refused with 400), and "victim,type=Warning" shows its own event, not
// the Warning events of the pod named "victim".
func TestEvctlEscapedNames(t *testing.T) {
	t.Parallel()
	for _, ext := range []bool{true, false} {
		p := eventsdtest.Start(t, eventsdtest.Options{Args: []string{fmt.Sprintf("--extensions=%v", ext)}})
		cs := p.Clientset()
		mk := func(name, object, typ, reason string) {
			t.Helper()
			_, err := cs.CoreV1().Events("default").Create(context.Background(), &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: name},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: object},
				Reason:         reason, Message: "about " + object, Type: typ, Count: 1, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
		mk("ab", "a=b", "Normal", "Pulled")
		mk("victim", "victim", "Warning", "Secret")
		mk("comma", "victim,type=Warning", "Normal", "Started")
		mk("slash", `back\slash`, "Normal", "Odd,reason=x")

		for _, c := range []struct {
			args []string
			want string // the one row's reason
		}{
			{[]string{"get", "--for", "pod/a=b"}, "Pulled"},
			{[]string{"get", "--for", "pod/victim,type=Warning"}, "Started"},
			{[]string{"get", "--for", "pod/victim"}, "Secret"},
			{[]string{"get", "--reason", "Odd,reason=x"}, "Odd,reason=x"},
			{[]string{"timeline", "pod/a=b"}, "Pulled"},
			{[]string{"timeline", "pod/victim,type=Warning"}, "Started"},
			{[]string{"timeline", `pod/back\slash`}, "Odd,reason=x"},
		} {
			out, _ := evctlRun(t, p.URL, c.args...)
			rows := strings.Split(strings.TrimSpace(out), "\n")[1:]
			if len(rows) != 1 || !strings.Contains(rows[0], " "+c.want+" ") {
				t.Errorf("ext=%v evctl %q: want one %s row:\n%s", ext, c.args, c.want, out)
			}
		}
	}
}

// TestEvctlTimelineOwnNamespace: a user who may read events only in its
// own namespace (bob in prod, in the README's ABAC policy) gets evctl
// timeline there, as it gets evctl get and watch: the list across
// namespaces is refused (403), and evctl reads the context's namespace
// instead, saying so, with and without eventsd's extensions, and keeps
// it live with --watch. In a namespace bob may not read, the refusal is
// the answer.
func TestEvctlTimelineOwnNamespace(t *testing.T) {
	t.Parallel()
	policy, err := filepath.Abs(filepath.Join("..", "..", "docs", "examples", "abac-policy.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ext := range []bool{true, false} {
		p := azStart(t, "--token-auth-file", azTokenFile(t), "--authorization-mode", "ABAC", "--authorization-policy-file", policy,
			fmt.Sprintf("--extensions=%v", ext))
		root := azClient(t, p, "tok-root")
		at := time.Now().Add(-time.Hour)
		mk := func(ns, name, reason string, regarding corev1.ObjectReference, related *corev1.ObjectReference) {
			t.Helper()
			at = at.Add(time.Minute) // in the order written
			_, err := root.CoreV1().Events(ns).Create(context.Background(), &corev1.Event{
				ObjectMeta: metav1.ObjectMeta{Name: name}, InvolvedObject: regarding, Related: related,
				Reason: reason, Message: name, Type: "Normal", Count: 1, FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at),
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
		node := corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "node-1"}
		web := func(ns string) corev1.ObjectReference {
			return corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: "web"}
		}
		mk("prod", "web-scheduled", "Scheduled", web("prod"), &node)
		mk("prod", "web-pulled", "Pulled", web("prod"), nil)
		mk("staging", "web-staging", "Pulled", web("staging"), &node)
		mk("default", "node-ready", "NodeReady", node, nil)
		kubeconfig := azKubeconfig(t, p, "tok-bob")

		run := func(args ...string) (string, string, error) {
			var out, errOut bytes.Buffer
			cmd := evctl.NewCommand(&out, &errOut)
			cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
			err := cmd.ExecuteContext(context.Background())
			return out.String(), errOut.String(), err
		}
		notice := `Warning: events.events.k8s.io is forbidden: User "bob" cannot list resource "events" in API group "events.k8s.io" at the cluster scope`
		for _, c := range []struct {
			args []string
			want []string // the rows' messages, in order
		}{
			// The family (or, without the extensions, the object alone),
			// without the lineage, which bob may not read.
			{[]string{"pod/web"}, []string{"web-scheduled", "web-pulled"}},
			// node-ready (default) and web-staging are not bob's to read.
			{[]string{"node/node-1", "--family=false"}, []string{"web-scheduled"}},
		} {
			out, errOut, err := run(append([]string{"-n", "prod", "timeline"}, c.args...)...)
			if err != nil {
				t.Errorf("ext=%v bob: evctl -n prod timeline %s: %v\n%s", ext, c.args, err, errOut)
				continue
			}
			var got []string
			for _, row := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
				f := strings.Fields(row)
				got = append(got, f[len(f)-1])
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("ext=%v bob: evctl -n prod timeline %s: rows %q, want %q:\n%s", ext, c.args, got, c.want, out)
			}
			if !strings.Contains(errOut, notice) || !strings.Contains(errOut, `showing the events in namespace "prod" only`) {
				t.Errorf("ext=%v bob: evctl -n prod timeline %s: stderr %q, want the narrowing said", ext, c.args, errOut)
			}
			if family := len(c.args) == 1; family && ext && !strings.Contains(errOut, `cannot list resource "lineages"`) {
				t.Errorf("ext=%v bob: evctl -n prod timeline %s: stderr %q, want the lineage's refusal said", ext, c.args, errOut)
			} else if family && !ext && !strings.Contains(errOut, "Note: the server does not answer family queries") {
				t.Errorf("ext=%v bob: evctl -n prod timeline %s: stderr %q, want the fallback said", ext, c.args, errOut)
			}
		}
		// Where bob may read nothing, the namespace's refusal.
		if _, _, err := run("-n", "staging", "timeline", "pod/web"); !apierrors.IsForbidden(err) ||
			!strings.Contains(err.Error(), `cannot list resource "events" in API group "events.k8s.io" in the namespace "staging"`) {
			t.Errorf("ext=%v bob: evctl -n staging timeline pod/web: %v, want the namespace's 403", ext, err)
		}

		// Live, in prod.
		out := &syncbuf.Buffer{}
		wctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			cmd := evctl.NewCommand(out, out)
			cmd.SetArgs([]string{"--kubeconfig", kubeconfig, "-n", "prod", "timeline", "pod/web", "--watch"})
			done <- cmd.ExecuteContext(wctx)
		}()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(out.String(), "web-pulled") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		mk("prod", "web-killing", "Killing", web("prod"), nil)
		for !strings.Contains(out.String(), "web-killing") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ext=%v bob: evctl -n prod timeline pod/web --watch: %v", ext, err)
		}
		if got := out.String(); len(evctlLines(got, "web-killing")) != 1 || len(evctlLines(got, "web-scheduled")) != 1 {
			t.Errorf("ext=%v bob: live timeline in prod:\n%s", ext, got)
		}
	}
}
