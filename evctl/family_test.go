package evctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/internal/syncbuf"
	"github.com/kubevents/kubevents/lineage"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/server/servertest"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

// familyEnv is an eventsd in process whose lineage learns ownership from
// the events written to it, as eventsd does without a source cluster.
type familyEnv struct {
	t   *testing.T
	url string
	cs  kubernetes.Interface
	g   *lineage.Graph
	// written counts the events written, to name them.
	written int
}

// newFamilyEnv serves eventsd on loopback, its store's clock at now; with
// extensions false, as eventsd --extensions=false (or any API server).
func newFamilyEnv(t *testing.T, extensions bool) *familyEnv {
	t.Helper()
	clk := clocktesting.NewFakeClock(now)
	log := slog.New(slog.DiscardHandler)
	store, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: vfs.NewMem(), Clock: clk, DefaultTTL: 24 * time.Hour, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	g := lineage.New(lineage.Options{Clock: clk})
	g.SetLearning("")
	url, cs := servertest.Serve(t, server.Config{Store: store, EventTTL: 24 * time.Hour, Clock: clk, Logger: log,
		BookmarkInterval: time.Minute, Lineage: g, DisableExtensions: !extensions})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		lineage.RunEventLearner(ctx, lineage.EventLearnerOptions{Store: store, Graph: g, Clock: clk, Log: log})
	}()
	t.Cleanup(func() { cancel(); wg.Wait() }) // before Serve's cleanup closes the store
	return &familyEnv{t: t, url: url, cs: cs, g: g}
}

// event writes a core/v1 event about obj, as a controller or the kubelet
// does, at now-ago.
func (fe *familyEnv) event(obj corev1.ObjectReference, ago time.Duration, typ, reason, message string, src corev1.EventSource) {
	fe.t.Helper()
	ns := obj.Namespace
	if ns == "" {
		ns = "default"
	}
	ts := metav1.NewTime(at(ago))
	fe.written++
	_, err := fe.cs.CoreV1().Events(ns).Create(context.Background(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%d", strings.ToLower(obj.Name), fe.written)},
		InvolvedObject: obj, Reason: reason, Message: message, Type: typ, Source: src,
		FirstTimestamp: ts, LastTimestamp: ts, Count: 1,
	}, metav1.CreateOptions{})
	if err != nil {
		fe.t.Fatal(err)
	}
}

// The objects of the family the tests write.
var (
	famDeploy = corev1.ObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Namespace: "shop", Name: "web", UID: "d-uid"}
	famRS     = corev1.ObjectReference{Kind: "ReplicaSet", APIVersion: "apps/v1", Namespace: "shop", Name: "web-1", UID: "rs-uid"}
	famPodA   = corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "shop", Name: "web-1-a", UID: "pa-uid"}
	famPodB   = corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "shop", Name: "web-1-b", UID: "pb-uid"}
	famNode   = corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "node-1", UID: "node-1"}
	famOther  = corev1.ObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Namespace: "shop", Name: "api", UID: "api-uid"}
)

// pod names a Pod of the family.
func pod(name string) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "shop", Name: name, UID: types.UID(name + "-uid")}
}

var (
	deployCtrl = corev1.EventSource{Component: "deployment-controller"}
	rsCtrl     = corev1.EventSource{Component: "replicaset-controller"}
	kubelet    = corev1.EventSource{Component: "kubelet", Host: "node-1"}
)

// writeFamily writes a Deployment's rollout as its controllers and the
// kubelet announce it, so that the lineage learns the family from the
// events alone, and an unrelated Deployment's event; it waits until the
// lineage knows both Pods.
func (fe *familyEnv) writeFamily() {
	fe.t.Helper()
	normal := corev1.EventTypeNormal
	fe.event(famDeploy, 50*time.Minute, normal, "ScalingReplicaSet", "Scaled up replica set web-1 from 0 to 2", deployCtrl)
	fe.event(famRS, 49*time.Minute, normal, "SuccessfulCreate", "Created pod: web-1-a", rsCtrl)
	fe.event(famRS, 48*time.Minute+30*time.Second, normal, "SuccessfulCreate", "Created pod: web-1-b", rsCtrl)
	fe.event(famPodA, 48*time.Minute, normal, "Pulled", `Container image "web:1.4" already present on machine`, kubelet)
	fe.event(famPodA, 47*time.Minute, normal, "Started", "Started container web", kubelet)
	fe.event(famPodB, 10*time.Minute, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container web", kubelet)
	fe.event(famNode, 30*time.Minute, normal, "NodeReady", "Node node-1 status is now: NodeReady", kubelet)
	fe.event(famOther, 20*time.Minute, normal, "ScalingReplicaSet", "Scaled up replica set api-1 from 0 to 1", deployCtrl)
	fe.waitMembers("web", 4)
}

// waitMembers waits until the lineage's family of Deployment shop/name
// has n members.
func (fe *familyEnv) waitMembers(name string, n int) {
	fe.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := fe.g.Family(lineage.FamilySpec{Kind: "Deployment", Namespace: "shop", Name: name}).Members()
		if len(got) == n {
			return
		}
		if time.Now().After(deadline) {
			fe.t.Fatalf("the lineage learned %d members of Deployment shop/%s, want %d: %+v", len(got), name, n, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// run runs evctl against the server with the clock at now and returns its
// output and error output.
func (fe *familyEnv) run(args ...string) (string, string, error) {
	fe.t.Helper()
	var out, errOut syncbuf.Buffer
	cmd := NewCommand(&out, &errOut)
	cmd.SetArgs(append([]string{"--server", fe.url, "-n", "shop"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// runLive runs evctl as fe.run does, in the background until the test
// ends (then stopped as Ctrl-C would, and its error reported); it returns
// its output and a function that waits until the output holds a text.
func (fe *familyEnv) runLive(args ...string) (out *syncbuf.Buffer, waitFor func(string)) {
	t := fe.t
	t.Helper()
	out = &syncbuf.Buffer{}
	var errOut syncbuf.Buffer
	cmd := NewCommand(out, &errOut)
	cmd.SetArgs(append([]string{"--server", fe.url, "-n", "shop"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("evctl %q: %v\n%s", args, err, errOut.String())
		}
	})
	return out, func(s string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(out.String(), s) {
			if time.Now().After(deadline) {
				t.Fatalf("evctl %q printed no %q:\n%s\n%s", args, s, out.String(), errOut.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestFamilyTimelineTree: a Deployment's timeline is its family as a
// tree, learned from its controllers' events alone, each object with its
// events in time order, a deleted Pod marked, the unrelated Deployment
// left out; --with-nodes adds the Node its Pods ran on.
func TestFamilyTimelineTree(t *testing.T) {
	fe := newFamilyEnv(t, true)
	fe.writeFamily()
	fe.g.MarkDeleted("pa-uid", at(40*time.Minute))
	for _, c := range []struct {
		name string
		args []string
	}{
		{"family-tree", []string{"timeline", "deployment/web"}},
		{"family-tree-nodes", []string{"timeline", "deploy/web", "--with-nodes"}},
		{"family-tree-wide", []string{"timeline", "Deployment.apps/web", "-o", "wide"}},
		{"family-tree-uid", []string{"timeline", "--uid", "rs-uid"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, err := fe.run(c.args...)
			if err != nil || errOut != "" {
				t.Fatalf("evctl %v: %v\n%s", c.args, err, errOut)
			}
			golden(t, c.name, []byte(out))
		})
	}
	out, _, err := fe.run("timeline", "deployment/web", "-o", "json")
	var l eventsv1.EventList
	if err != nil || json.Unmarshal([]byte(out), &l) != nil || len(l.Items) != 6 || l.Items[0].Reason != "ScalingReplicaSet" {
		t.Errorf("timeline -o json: %v, want the family's 6 events, in time order:\n%s", err, out)
	}
}

// TestFamilyTimelineWindow: --since and --until keep the events within
// them, durations back from now or RFC3339 times, and the objects that
// have some (and their owners).
func TestFamilyTimelineWindow(t *testing.T) {
	fe := newFamilyEnv(t, true)
	fe.writeFamily()
	// The clock evctl reads is the real one: --since as a duration is
	// back from now, when every test event is in the past.
	for _, c := range []struct {
		args       []string
		want, gone []string
	}{
		{[]string{"--since", at(15 * time.Minute).Format(time.RFC3339)},
			[]string{"Deployment/web", "└─ReplicaSet/web-1", "  └─Pod/web-1-b", "BackOff"},
			[]string{"ScalingReplicaSet", "SuccessfulCreate", "Pulled", "web-1-a"}},
		{[]string{"--since", at(48*time.Minute + 45*time.Second).Format(time.RFC3339), "--until", at(47 * time.Minute).Format(time.RFC3339)},
			[]string{"Created pod: web-1-b", "Pulled", "Started", "  └─Pod/web-1-a"},
			[]string{"ScalingReplicaSet", "Created pod: web-1-a", "BackOff"}},
		{[]string{"--since", "87600h"}, // ten years back from the real now
			[]string{"ScalingReplicaSet", "BackOff"}, nil},
	} {
		out, errOut, err := fe.run(append([]string{"timeline", "deployment/web"}, c.args...)...)
		if err != nil || errOut != "" {
			t.Fatalf("timeline %v: %v\n%s", c.args, err, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("timeline %v: no %q in\n%s", c.args, w, out)
			}
		}
		for _, g := range c.gone {
			if strings.Contains(out, g) {
				t.Errorf("timeline %v: %q outside the window in\n%s", c.args, g, out)
			}
		}
	}
	for _, args := range [][]string{{"--since", "7d"}, {"--until", "yesterday"}, {"--since", "-1h"},
		{"--since", "1h", "--until", "2h"}} {
		_, _, err := fe.run(append([]string{"timeline", "deployment/web"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "--") {
			t.Errorf("timeline %v: %v, want an error naming the flag", args, err)
		}
	}
}

// TestFamilyTimelineWatch: -w prints the tree, then the events of a Pod
// that joins the family afterwards, with the Pod they are about, once.
func TestFamilyTimelineWatch(t *testing.T) {
	fe := newFamilyEnv(t, true)
	fe.writeFamily()
	out, waitFor := fe.runLive("timeline", "deployment/web", "-w")
	waitFor("BackOff")
	c := pod("web-1-c")
	fe.event(famRS, 5*time.Minute, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: web-1-c", rsCtrl)
	fe.event(c, 4*time.Minute, corev1.EventTypeNormal, "Started", "Started container web on c", kubelet)
	waitFor("Started container web on c")
	fe.event(famOther, 3*time.Minute, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set api-1 from 1 to 2", deployCtrl)
	fe.event(famPodB, 2*time.Minute, corev1.EventTypeWarning, "Unhealthy", "Readiness probe failed", kubelet)
	waitFor("Readiness probe failed")
	got := out.String()
	for _, want := range []string{"ReplicaSet/web-1   " + at(5*time.Minute).UTC().Format(timeFormat), "Pod/web-1-c   " + at(4*time.Minute).UTC().Format(timeFormat),
		"Pod/web-1-b   " + at(2*time.Minute).UTC().Format(timeFormat)} {
		if strings.Count(got, want) != 1 {
			t.Errorf("timeline -w: want one line with %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "api-1") {
		t.Errorf("timeline -w printed another family's event:\n%s", got)
	}
	if strings.Count(got, "Back-off restarting") != 1 {
		t.Errorf("timeline -w printed an event twice:\n%s", got)
	}
}

// TestFamilyTimelineFallback: a server that refuses the family selectors
// gets the object's own timeline, with a note saying why; --uid, which
// needs them, is an error.
func TestFamilyTimelineFallback(t *testing.T) {
	fe := newFamilyEnv(t, false)
	fe.writeFamily()
	out, errOut, err := fe.run("timeline", "deployment/web")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(errOut, "Note: the server does not answer family queries (") ||
		!strings.Contains(errOut, "field label not supported") || !strings.HasSuffix(errOut, "; showing Deployment/web alone.\n") ||
		strings.Count(errOut, "\n") != 1 {
		t.Errorf("stderr %q, want one note saying why the timeline is the object's alone", errOut)
	}
	want := "TIME                   UNTIL   COUNT   TYPE     REASON              ROLE        OBJECT           MESSAGE\n" +
		at(50*time.Minute).UTC().Format(timeFormat) + "           1       Normal   ScalingReplicaSet   regarding   Deployment/web   Scaled up replica set web-1 from 0 to 2\n"
	if out != want {
		t.Errorf("the fallback timeline:\n%s\nwant:\n%s", out, want)
	}
	if _, _, err := fe.run("timeline", "--uid", "d-uid"); err == nil || !strings.Contains(err.Error(), "--uid needs them") {
		t.Errorf("--uid without family queries: %v", err)
	}
}

// TestFamilyTimelineWarning: the server's warning that it does not learn
// ownership is printed once on stderr, and the timeline still shown.
func TestFamilyTimelineWarning(t *testing.T) {
	fe := newFamilyEnv(t, true)
	fe.writeFamily()
	fe.g.SetLearning("the source refuses to list pods")
	out, errOut, err := fe.run("timeline", "deployment/web")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(errOut, "Warning: ") != 1 || !strings.Contains(errOut, "the source refuses to list pods") {
		t.Errorf("stderr %q, want the server's warning once", errOut)
	}
	if !strings.Contains(out, "└─ReplicaSet/web-1") {
		t.Errorf("no tree:\n%s", out)
	}
}

// TestFamilyTimelineArgs: the object is named once, and the flags that
// need the family are refused without it.
func TestFamilyTimelineArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"timeline"}, "name the object"},
		{[]string{"timeline", "pod/a", "--uid", "u"}, "not both"},
		{[]string{"timeline", "--uid", "u", "--family=false"}, "--uid needs the family"},
		{[]string{"timeline", "pod/a", "--with-nodes", "--family=false"}, "--with-nodes"},
	} {
		cmd := NewCommand(&syncbuf.Buffer{}, &syncbuf.Buffer{})
		cmd.SetArgs(append([]string{"--server", "http://127.0.0.1:1"}, c.args...))
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("evctl %v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}

// TestBuildTree: events are placed under the object they are about,
// by uid, else by name (the incarnation alive then, when a name was
// reused); under their related object when only that one is in the
// family; under an object of their own when neither is, so that none is
// left out; and --with-nodes draws the Nodes the lineage knows only from
// its Pods.
func TestBuildTree(t *testing.T) {
	lin := func(o corev1.ObjectReference, first time.Duration, deleted bool, owners ...corev1.ObjectReference) eventapi.Lineage {
		l := eventapi.Lineage{Object: o, Owners: owners, FirstSeen: metav1.NewTime(at(first)), Deleted: deleted}
		if o.Kind == "Pod" {
			l.Node = "node-1"
		}
		return l
	}
	old, cur := pod("web-1-x"), pod("web-1-x")
	old.UID, cur.UID = "old-uid", "cur-uid"
	objs := []eventapi.Lineage{
		lin(famRS, 60*time.Minute, false),
		lin(cur, 20*time.Minute, false, famRS), // the newer first: the order must not matter
		lin(old, 50*time.Minute, true, famRS),
	}
	ev := func(name string, regarding corev1.ObjectReference, related *corev1.ObjectReference, ago time.Duration, reason string) *row {
		return newRow(&eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Regarding: regarding, Related: related, Reason: reason, Type: "Normal", Note: reason + " " + name,
			EventTime: metav1.NewMicroTime(at(ago))})
	}
	byName := func(o corev1.ObjectReference) corev1.ObjectReference { o.UID = ""; return o }
	stranger := corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "stranger"}
	rows := []*row{
		ev("a", byName(cur), nil, 10*time.Minute, "Started"),   // the current incarnation
		ev("b", byName(old), nil, 45*time.Minute, "Started"),   // the deleted one, alive then
		ev("c", old, nil, 40*time.Minute, "Killing"),           // by uid
		ev("d", stranger, &famRS, 30*time.Minute, "Preempted"), // the family's only as related
		ev("e", stranger, nil, 5*time.Minute, "Started"),       // not the family's
		ev("f", corev1.ObjectReference{Kind: "Node", Namespace: "default", Name: "node-1"}, nil, 15*time.Minute, "NodeReady"),
	}
	var buf bytes.Buffer
	p := &printer{out: &buf, now: func() time.Time { return now }}
	if err := p.family(buildTree(objs, rows, true)); err != nil {
		t.Fatal(err)
	}
	golden(t, "family-build", buf.Bytes())
}

// TestFamilyTimelineNoLineages: a server that takes family selectors but
// serves no lineages (404: an eventsd of before them, here eventsd behind
// a proxy that hides them) gets the object's own timeline, with a note.
func TestFamilyTimelineNoLineages(t *testing.T) {
	fe := newFamilyEnv(t, true)
	fe.writeFamily()
	target, err := url.Parse(fe.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/lineages") {
			http.NotFound(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer hs.Close()
	fe.url = hs.URL
	out, errOut, err := fe.run("timeline", "deployment/web")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(errOut, "Note: the server does not answer family queries (") || !strings.HasSuffix(errOut, "; showing Deployment/web alone.\n") {
		t.Errorf("stderr %q, want a note saying why the timeline is the object's alone", errOut)
	}
	if !strings.HasPrefix(out, "TIME ") || strings.Count(out, "\n") != 2 || !strings.Contains(out, "ScalingReplicaSet") {
		t.Errorf("the fallback timeline:\n%s", out)
	}
}
