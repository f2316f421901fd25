package lineage

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// memRecords is an in-memory RecordStore.
type memRecords struct {
	mu   sync.Mutex
	recs map[string]map[string][]byte
	fail error
}

func (m *memRecords) Records(_ context.Context, space string, fn func(string, []byte) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(m.recs[space])) {
		if err := fn(k, m.recs[space][k]); err != nil {
			return err
		}
	}
	return nil
}

func (m *memRecords) SaveRecords(_ context.Context, space string, ws []storage.RecordWrite) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	if m.recs == nil {
		m.recs = map[string]map[string][]byte{}
	}
	if m.recs[space] == nil {
		m.recs[space] = map[string][]byte{}
	}
	for _, w := range ws {
		if w.Value == nil {
			delete(m.recs[space], w.Key)
		} else {
			m.recs[space][w.Key] = slices.Clone(w.Value)
		}
	}
	return nil
}

var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

func obj(uid, kind, ns, name string, owners ...string) Object {
	o := Object{ID: ID(uid), Kind: kind, Namespace: ns, Name: name, FirstSeen: t0}
	for _, ow := range owners {
		o.Owners = append(o.Owners, ID(ow))
	}
	return o
}

func event(kind, ns, name, uid, reason, msg string, at time.Time) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: name + ".x"},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name, UID: types.UID(uid)},
		Reason:         reason, Message: msg,
		FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at),
	}
}

// app builds a Deployment web (two rollouts) and an unrelated one.
func app(g *Graph) {
	for _, o := range []Object{
		obj("d", "Deployment", "shop", "web"),
		obj("rs1", "ReplicaSet", "shop", "web-1", "d"),
		obj("rs2", "ReplicaSet", "shop", "web-2", "d"),
		obj("p1", "Pod", "shop", "web-1-a", "rs1"),
		obj("p2", "Pod", "shop", "web-1-b", "rs1"),
		obj("p3", "Pod", "shop", "web-2-a", "rs2"),
		obj("e", "Deployment", "shop", "api"),
		obj("rs3", "ReplicaSet", "shop", "api-1", "e"),
		obj("p4", "Pod", "shop", "api-1-a", "rs3"),
	} {
		g.Observe(o)
	}
}

func TestFamilyTransitiveAndDeleted(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	g := New(Options{Clock: clk})
	app(g)
	clk.Step(time.Minute)
	g.MarkDeleted("rs1", time.Time{})
	g.MarkDeleted("p1", time.Time{})
	f := g.Family(FamilySpec{Kind: "deployment", Namespace: "shop", Name: "web"})
	if !f.Known() {
		t.Fatal("family of a known Deployment is not Known")
	}
	want := map[string]bool{"d": true, "rs1": true, "rs2": true, "p1": true, "p2": true, "p3": true, "e": false, "rs3": false, "p4": false}
	for _, o := range []Object{obj("d", "Deployment", "shop", "web"), obj("rs1", "ReplicaSet", "shop", "web-1"),
		obj("rs2", "ReplicaSet", "shop", "web-2"), obj("p1", "Pod", "shop", "web-1-a"), obj("p2", "Pod", "shop", "web-1-b"),
		obj("p3", "Pod", "shop", "web-2-a"), obj("e", "Deployment", "shop", "api"), obj("rs3", "ReplicaSet", "shop", "api-1"),
		obj("p4", "Pod", "shop", "api-1-a")} {
		ev := event(o.Kind, o.Namespace, o.Name, string(o.ID), "R", "m", t0.Add(30*time.Second))
		if got := f.Involves(ev); got != want[string(o.ID)] {
			t.Errorf("Involves(event of %s) = %v, want %v", o.Name, got, want[string(o.ID)])
		}
		// As the related object too.
		rel := event("Node", "", "n1", "", "R", "m", t0)
		rel.Related = &ev.InvolvedObject
		if got := f.Involves(rel); got != want[string(o.ID)] {
			t.Errorf("Involves(event related to %s) = %v, want %v", o.Name, got, want[string(o.ID)])
		}
	}
	if got, want := f.Names(), []string{"web", "web-1", "web-1-a", "web-1-b", "web-2", "web-2-a"}; !slices.Equal(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	var members []string
	for _, m := range f.Members() {
		members = append(members, m.Name)
	}
	if want := []string{"web", "web-1", "web-1-a", "web-1-b", "web-2", "web-2-a"}; !slices.Equal(members, want) {
		t.Errorf("Members = %v, want %v", members, want)
	}
	// A ReplicaSet's family is it and its Pods, not its owner.
	rs := g.Family(FamilySpec{UID: "rs2"})
	if rs.Involves(event("Deployment", "shop", "web", "d", "R", "m", t0)) || !rs.Involves(event("Pod", "shop", "web-2-a", "p3", "R", "m", t0)) {
		t.Error("a ReplicaSet's family holds its owner or lacks its Pod")
	}
}

func TestFamilyGrowsLive(t *testing.T) {
	g := New(Options{Clock: clocktesting.NewFakeClock(t0)})
	app(g)
	f := g.Family(FamilySpec{Kind: "Deployment", Namespace: "shop", Name: "web"})
	late := event("Pod", "shop", "web-2-z", "p9", "Scheduled", "x", t0)
	if f.Involves(late) {
		t.Fatal("an unknown Pod is in the family")
	}
	var notified []ID
	cancel := g.Subscribe(func(id ID) { notified = append(notified, id) })
	g.Observe(obj("p9", "Pod", "shop", "web-2-z", "rs2"))
	cancel()
	if !f.Involves(late) {
		t.Error("a Pod learned after the family was made is not in it")
	}
	if !slices.Contains(notified, "p9") {
		t.Errorf("subscriber told %v, not p9", notified)
	}
}

func TestUnknownObjectMatchesByName(t *testing.T) {
	g := New(Options{Clock: clocktesting.NewFakeClock(t0)})
	f := g.Family(FamilySpec{Kind: "Deployment", Namespace: "shop", Name: "web"})
	if f.Known() {
		t.Error("an unknown Deployment's family is Known")
	}
	if !f.Involves(event("Deployment", "shop", "web", "u", "R", "m", t0)) {
		t.Error("an unknown object's own events are not in its family")
	}
	if f.Involves(event("Deployment", "other", "web", "u2", "R", "m", t0)) {
		t.Error("a same-named object in another namespace is in the family")
	}
	if got := f.Names(); !slices.Equal(got, []string{"web"}) {
		t.Errorf("Names = %v", got)
	}
	any := g.Family(FamilySpec{Kind: "Deployment", AnyNamespace: true, Name: "web"})
	if !any.Involves(event("Deployment", "other", "web", "u2", "R", "m", t0)) {
		t.Error("AnyNamespace misses another namespace's object")
	}
}

func TestAnnouncementsKeepFamilyWhole(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	g := New(Options{Clock: clk})
	// Only the Deployment's metadata is known; its ReplicaSet and Pods came
	// and went while nothing watched: their controllers' events remain.
	g.Observe(obj("d", "Deployment", "shop", "web"))
	g.ObserveEvent(event("Deployment", "shop", "web", "d", "ScalingReplicaSet", "Scaled up replica set web-7d9 from 0 to 2", t0))
	g.ObserveEvent(event("ReplicaSet", "shop", "web-7d9", "rs9", "SuccessfulCreate", "Created pod: web-7d9-abcde", t0))
	g.ObserveEvent(event("ReplicaSet", "shop", "web-7d9", "rs9", "SuccessfulDelete", "Deleted pod: web-7d9-abcde", t0.Add(5*time.Minute)))
	f := g.Family(FamilySpec{Kind: "Deployment", Namespace: "shop", Name: "web"})
	for _, ev := range []*corev1.Event{
		event("ReplicaSet", "shop", "web-7d9", "rs9", "SuccessfulCreate", "Created pod: web-7d9-abcde", t0),
		event("Pod", "shop", "web-7d9-abcde", "pod-uid-never-seen", "BackOff", "Back-off", t0.Add(time.Minute)),
		event("Pod", "shop", "web-7d9-abcde", "", "Killing", "Stopping", t0.Add(5*time.Minute)),
	} {
		if !f.Involves(ev) {
			t.Errorf("event %s of %s/%s not in the family", ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name)
		}
	}
	// The same Pod name an hour after its deletion is another Pod.
	if f.Involves(event("Pod", "shop", "web-7d9-abcde", "", "Pulled", "x", t0.Add(time.Hour))) {
		t.Error("a name-only Pod matches long after it was deleted")
	}
	// The ReplicaSet's metadata arrives: the name-only record merges into it.
	g.Observe(obj("rs9", "ReplicaSet", "shop", "web-7d9", "d"))
	if _, ok := g.Get(NameID("ReplicaSet", "shop", "web-7d9")); ok {
		t.Error("the name-only ReplicaSet was not merged into its uid")
	}
	if !f.Involves(event("Pod", "shop", "web-7d9-abcde", "", "Killing", "Stopping", t0.Add(5*time.Minute))) {
		t.Error("after the merge, the Pod left the family")
	}
	// Deployment scale messages of older versions.
	g.ObserveEvent(event("Deployment", "shop", "web", "d", "ScalingReplicaSet", "Scaled down replica set web-old to 0", t0))
	if o := g.Lookup("ReplicaSet", "shop", "web-old"); len(o) != 1 || !slices.Equal(o[0].Owners, []ID{"d"}) {
		t.Errorf("old-style scaling message: %+v", o)
	}
}

func TestNodes(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	g := New(Options{Clock: clk})
	app(g)
	kubelet := event("Pod", "shop", "web-2-a", "p3", "Pulled", "pulled", t0)
	kubelet.Source = corev1.EventSource{Component: "kubelet", Host: "node-1"}
	g.ObserveEvent(kubelet)
	sched := event("Pod", "shop", "web-1-a", "p1", "Scheduled", "Successfully assigned shop/web-1-a to node-2", t0)
	g.ObserveEvent(sched)
	clk.Step(10 * time.Minute)
	g.MarkDeleted("p3", time.Time{})
	if o, _ := g.Get("p3"); o.Node != "node-1" {
		t.Errorf("p3 node %q", o.Node)
	}
	if o, _ := g.Get("p1"); o.Node != "node-2" {
		t.Errorf("p1 node %q", o.Node)
	}
	without := g.Family(FamilySpec{Kind: "Deployment", Namespace: "shop", Name: "web"})
	with := g.Family(FamilySpec{Kind: "Deployment", Namespace: "shop", Name: "web", WithNodes: true})
	during := event("Node", "", "node-1", "n1", "NodeNotReady", "x", t0.Add(5*time.Minute))
	after := event("Node", "", "node-1", "n1", "NodeNotReady", "x", t0.Add(30*time.Minute))
	if without.Involves(during) || !with.Involves(during) || with.Involves(after) {
		t.Errorf("node events: without %v, with during %v, with after %v", without.Involves(during), with.Involves(during), with.Involves(after))
	}
	if names := with.Names(); !slices.Contains(names, "node-1") || !slices.Contains(names, "node-2") {
		t.Errorf("Names with nodes = %v", names)
	}
}

func TestPersistAndCollect(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	store := &memRecords{}
	has := map[ID]bool{"p2": true}
	g := New(Options{Clock: clk, Store: store, Events: checkerFunc(func(o *Object) bool { return has[o.ID] })})
	app(g)
	g.ObserveEvent(event("ReplicaSet", "shop", "web-1", "rs1", "SuccessfulCreate", "Created pod: web-1-c", t0))
	if err := g.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Loaded into a new graph, the family is the same.
	g2 := New(Options{Clock: clk, Store: store})
	if err := g2.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := g.Family(FamilySpec{Kind: "Deployment", Namespace: "shop", Name: "web"}).Names()
	b := g2.Family(FamilySpec{Kind: "Deployment", Namespace: "shop", Name: "web"}).Names()
	if !slices.Equal(a, b) || len(a) != 7 {
		t.Errorf("names before %v, after reload %v", a, b)
	}
	// A failed save is retried by the next flush.
	g.Observe(obj("p8", "Pod", "shop", "web-2-q", "rs2"))
	store.fail = storage.ErrUnavailable
	if err := g.Flush(context.Background()); err == nil {
		t.Fatal("Flush succeeded on a failing store")
	}
	store.fail = nil
	if err := g.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := store.recs[DefaultSpace]["p8"]; !ok {
		t.Error("the record of a failed save was lost")
	}
	// Collect: deleted long enough, no events, no children kept.
	for _, id := range []ID{"p1", "p2", "rs1"} {
		g.MarkDeleted(id, time.Time{})
	}
	if n, _ := g.Collect(context.Background()); n != 0 {
		t.Errorf("collected %d within the grace period", n)
	}
	clk.Step(2 * DefaultCollectGrace)
	n, err := g.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// p1 goes (no events); p2 has events; rs1 owns p2 and the name-only web-1-c.
	if _, ok := g.Get("p1"); ok || n != 1 {
		t.Errorf("collected %d; p1 still held: %v", n, ok)
	}
	for _, id := range []ID{"p2", "rs1", "d"} {
		if _, ok := g.Get(id); !ok {
			t.Errorf("%s collected though needed", id)
		}
	}
	if err := g.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := store.recs[DefaultSpace]["p1"]; ok {
		t.Error("a collected object's record is still stored")
	}
}

func TestReplaceMarksMissingDeleted(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	g := New(Options{Clock: clk})
	app(g)
	g.ObserveEvent(event("ReplicaSet", "shop", "web-1", "rs1", "SuccessfulCreate", "Created pod: web-1-c", t0))
	clk.Step(time.Minute)
	g.Replace("v1", "Pod", []Object{obj("p2", "Pod", "shop", "web-1-b", "rs1")})
	for id, deleted := range map[ID]bool{"p1": true, "p2": false, "p3": true, "p4": true, "rs1": false} {
		if o, _ := g.Get(id); o.Deleted != deleted {
			t.Errorf("%s deleted %v, want %v", id, o.Deleted, deleted)
		}
	}
	if o, ok := g.Get(NameID("Pod", "shop", "web-1-c")); !ok || o.Deleted {
		t.Error("a relist marked a name-only Pod deleted: it has no uid to be listed by")
	}
}

type checkerFunc func(*Object) bool

func (f checkerFunc) HasEvents(_ context.Context, o *Object) (bool, error) { return f(o), nil }

func TestEventSpan(t *testing.T) {
	ev := &corev1.Event{EventTime: metav1.NewMicroTime(t0), Series: &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(t0.Add(time.Hour))}}
	if f, l := EventSpan(ev); !f.Equal(t0) || !l.Equal(t0.Add(time.Hour)) {
		t.Errorf("series span %v %v", f, l)
	}
	legacy := &corev1.Event{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)}}
	if f, l := EventSpan(legacy); !f.Equal(t0) || !l.Equal(t0) {
		t.Errorf("bare span %v %v", f, l)
	}
	if s := (FamilySpec{Kind: "Deployment", Namespace: "shop", Name: "web"}).String(); !strings.Contains(s, "shop/web") {
		t.Error(s)
	}
}

// TestFamilyMembershipFollowsChanges: the members a family's walk found
// answer Involves only while the graph is unchanged: a Pod moved to
// another owner leaves the family at once, one moved back returns, and a
// Pod added is in it.
func TestFamilyMembershipFollowsChanges(t *testing.T) {
	for _, names := range []bool{true, false} {
		t.Run(fmt.Sprintf("names %v", names), func(t *testing.T) {
			g := New(Options{Clock: clocktesting.NewFakeClock(t0)})
			app(g)
			f := g.Family(FamilySpec{Kind: "Deployment", Namespace: "shop", Name: "web"})
			if names { // a list's plan reads the names first
				f.Names()
			}
			ev := event("Pod", "shop", "web-2-a", "p3", "Started", "x", t0)
			for range 2 {
				if !f.Involves(ev) {
					t.Fatal("the event of a member is not in the family")
				}
			}
			if !f.inSet("p3") || f.inSet("p4") {
				t.Error("the members found are not kept, or hold another Deployment's Pod")
			}
			g.Observe(obj("p3", "Pod", "shop", "web-2-a", "rs3"))
			for range 10 { // past the checks that read the set again
				if f.Involves(ev) {
					t.Fatal("a Pod now owned by another Deployment's ReplicaSet is still in the family")
				}
			}
			g.Observe(obj("p3", "Pod", "shop", "web-2-a", "rs2"))
			g.Observe(obj("p8", "Pod", "shop", "web-2-b", "rs2"))
			for _, ev := range []*corev1.Event{ev, event("Pod", "shop", "web-2-b", "p8", "Started", "x", t0)} {
				for range 10 {
					if !f.Involves(ev) {
						t.Fatalf("%s, owned by the family's ReplicaSet, is not in it", ev.InvolvedObject.Name)
					}
				}
			}
			if !f.inSet("p8") {
				t.Error("the members were not read again after the graph changed")
			}
		})
	}
}
