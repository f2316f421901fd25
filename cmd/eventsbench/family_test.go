package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/lineage"
)

// TestFamilyFlags: bad flags of the family mode are refused, each with
// an error naming the flag, before anything starts.
func TestFamilyFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--phases", "query,bogus", "--eventsd", "x"}, `"bogus"`},
		{[]string{"--phases", "create"}, "--eventsd is required"},
		{[]string{"--phases", "follow"}, "needs --kube-apiserver"},
		{[]string{"--eventsd", "x", "--follow-pods", "150", "--kube-apiserver", "built"}, "--follow-pods"},
		{[]string{"--eventsd", "x", "--queries", "0", "--kube-apiserver", "built"}, "--queries"},
		{[]string{"--eventsd", "x", "--objects", "320", "--kube-apiserver", "built"}, "--objects 320"},
		{[]string{"--eventsd", "x", "--events", "5000", "--kube-apiserver", "built"}, "--events 5000"},
		{[]string{"--eventsd", "x", "--pairs", "0", "--phases", "create"}, "--pairs"},
		{[]string{"--eventsd", "/nonexistent/eventsd", "--phases", "create"}, "--eventsd"},
	} {
		var out bytes.Buffer
		cmd := newRootCommand()
		cmd.SetArgs(append([]string{"family"}, tc.args...))
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("family %v: error %v, want one with %q", tc.args, err, tc.want)
		}
	}
}

// TestFamilyPlan: the query phase's store holds exactly --events events,
// the family exactly its shape's, every event name once, and the lineage
// learned from them alone (announcements and kubelet events) puts every
// Pod in the Deployment's family, and no Pod of the other web.
func TestFamilyPlan(t *testing.T) {
	cfg := defaultFamilyBenchConfig()
	cfg.Events, cfg.Objects, cfg.Namespaces, cfg.Rollouts, cfg.PodsPerRS = 9_999, 1_000, 3, 2, 7
	n, extra, err := cfg.noisePlan()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	g := lineage.New(lineage.Options{})
	total, fam := 0, 0
	emit := func(ev *corev1.Event) {
		key := ev.Namespace + "/" + ev.Name
		if names[key] {
			t.Fatalf("event %s twice", key)
		}
		names[key] = true
		total++
		g.ObserveEvent(ev)
	}
	base := time.Now().Add(-time.Hour)
	objects := 0
	for i := range n {
		s := cfg.noiseShape(i, n, extra)
		fo := genFamily(s, base, emit)
		objects += len(fo.all())
	}
	before := total
	fo := genFamily(cfg.target(), base, emit)
	fam = total - before
	objects += len(fo.all())
	if int64(total) != cfg.Events || fam != cfg.target().events() {
		t.Errorf("%d events (the family's %d), want %d (%d)", total, fam, cfg.Events, cfg.target().events())
	}
	if objects > cfg.Objects || objects < cfg.Objects-13 {
		t.Errorf("%d objects, want %d give or take one other family", objects, cfg.Objects)
	}
	members := map[string]bool{}
	for _, o := range g.Family(lineage.FamilySpec{Kind: "Deployment", Namespace: familyNamespace, Name: familyName}).Members() {
		members[o.Kind+"/"+o.Namespace+"/"+o.Name] = true
	}
	for _, ps := range fo.Pods {
		for _, p := range ps {
			if !members["Pod/"+p.Namespace+"/"+p.Name] {
				t.Errorf("%s is not in the family learned from the events", p.String())
			}
		}
	}
	if len(members) != cfg.target().objects() {
		t.Errorf("the family learned from the events has %d members, want %d: %v", len(members), cfg.target().objects(), members)
	}
}

// TestAnnouncingEvents: the create load's mix announces each pod's
// ReplicaSet and the ReplicaSet's Deployment, so that the lineage learns
// families from it.
func TestAnnouncingEvents(t *testing.T) {
	g := lineage.New(lineage.Options{})
	reasons := map[string]int{}
	for j := range 20 {
		p := newPod("bench-0", "pod-"+string(rune('0'+j%10)))
		if j >= 10 {
			p = newPod("bench-0", "pod-1"+string(rune('0'+j%10)))
		}
		for seq := range 50 {
			ev := newAnnouncingEvent(p, seq)
			reasons[ev.Reason]++
			g.ObserveEvent(ev)
		}
	}
	if reasons["SuccessfulCreate"] != 80 || reasons["ScalingReplicaSet"] != 20 {
		t.Errorf("reasons %v: want 4 Created pod and 1 Scaled up in 50", reasons)
	}
	fam := g.Family(lineage.FamilySpec{Kind: "Deployment", Namespace: "bench-0", Name: "pod-d1"})
	var pods []string
	for _, o := range fam.Members() {
		if o.Kind == "Pod" {
			pods = append(pods, o.Name)
		}
	}
	if len(pods) != 10 || !strings.HasPrefix(pods[0], "pod-1") {
		t.Errorf("Deployment pod-d1's pods: %v, want pod-10 … pod-19", pods)
	}
}

// TestFamilyTiny runs the query and create phases at a tiny size against
// a real eventsd (no kube-apiserver): the family query must return every
// family event to a protobuf and a JSON client, the one-object-at-a-time
// lists the same number, and the report must show them, and both create
// runs. With --store-dir, a second run reuses the first's store and
// finds the same family in it; a run of another size fills a new one.
func TestFamilyTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts eventsd")
	}
	bin := eventsdtest.Binary(t)
	cfg := defaultFamilyBenchConfig()
	cfg.Eventsd, cfg.Phases = bin, []string{familyPhaseQuery, familyPhaseCreate}
	cfg.Events, cfg.Objects, cfg.Namespaces, cfg.Rollouts, cfg.PodsPerRS = 3_000, 600, 3, 2, 10
	cfg.Queries, cfg.Rounds, cfg.Pairs, cfg.CreateClients, cfg.CreateObjects = 5, 1, 1, 2, 50
	cfg.CreateDuration, cfg.CreateWarmup = 500*time.Millisecond, 100*time.Millisecond
	cfg.DataParent, cfg.Log, cfg.Command = t.TempDir(), testLog{t}, "eventsbench family (test)"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := runFamilyBench(ctx, cfg)
	if rep != nil {
		var md bytes.Buffer
		printFamilyReport(&md, rep)
		t.Logf("report:\n%s", md.String())
		for _, want := range []string{
			"| eventsd | family.kind=Deployment,family.name=web (one list, 5 queries; Accept: application/vnd.kubernetes.protobuf,application/json) | 1 | 123 |",
			"| eventsd | family.kind=Deployment,family.name=web (one list, 5 queries; Accept: application/json) | 1 | 123 |",
			"| eventsd | involvedObject.uid=…, one object at a time (a round; 1 rounds) | 23 | 123 |", "| true | 2 |", "| false | 2 |", "goal family query p99"} {
			if !strings.Contains(md.String(), want) {
				t.Errorf("report lacks %q", want)
			}
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if q := rep.Query; q.GraphObjects < cfg.Objects-13 || q.FamilyEvents != 123 {
		t.Errorf("the lineage held %d objects, the family %d events", q.GraphObjects, q.FamilyEvents)
	}
	if c := rep.Create; len(c.Runs) != 2 || c.Ratio <= 0 {
		t.Errorf("create runs %+v", c)
	}

	cfg.Phases, cfg.StoreDir = []string{familyPhaseQuery}, filepath.Join(t.TempDir(), "store")
	for i, want := range []bool{false, true, false} {
		if i == 2 {
			cfg.Events = 3_100
		}
		rep, err := runFamilyBench(ctx, cfg)
		if err != nil {
			t.Fatalf("--store-dir, run %d: %v", i, err)
		}
		if q := rep.Query; q.StoreReused != want || q.Family.Returned != 123 || q.EventsdPerObject.Returned != 123 || q.GraphObjects < cfg.Objects-13 {
			t.Errorf("--store-dir, run %d: reused %v (want %v), %d and %d events returned, the lineage holding %d objects",
				i, q.StoreReused, want, q.Family.Returned, q.EventsdPerObject.Returned, q.GraphObjects)
		}
	}
}
