package ui_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubevents/kubevents/demo"
	"github.com/kubevents/kubevents/lineage"
	"github.com/kubevents/kubevents/server"
)

// familyLane is a lane of the family view as the page draws it.
type familyLane struct {
	Kind, Name, Group string
	Depth             int
	Deleted, Struck   bool
	Badge             bool
	Indent            float64
	Reasons           []string
	Count             int
	Life, LifeEnd     bool
	// LifeEndAt is where the lifespan ends, as a fraction of the track.
	LifeEndAt float64
}

const familyLanesJS = `[...document.querySelectorAll('#lanes .family-lane')].map(l => ({
	Kind: l.dataset.objectKind, Name: l.dataset.name, Group: l.dataset.group,
	Depth: +l.dataset.depth, Deleted: l.dataset.deleted === 'true',
	Struck: l.querySelector('.lane-label s a.object-name') !== null,
	Badge: l.querySelector('.badge.deleted') !== null,
	Indent: parseFloat(getComputedStyle(l.querySelector('.lane-label')).paddingLeft),
	Reasons: [...l.querySelectorAll('.item')].flatMap(i => i.dataset.reason.split(' ')),
	Count: [...l.querySelectorAll('.item')].reduce((n, i) => n + +i.dataset.count, 0),
	Life: l.querySelector('rect.life') !== null, LifeEnd: l.querySelector('line.life-end') !== null,
	LifeEndAt: l.querySelector('line.life-end') ? l.querySelector('line.life-end').x1.baseVal.value / l.querySelector('svg.track').width.baseVal.value : 0,
}))`

func familyLanes(t *testing.T, ctx context.Context) []familyLane {
	t.Helper()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]familyLane](familyLanesJS))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// laneNames renders lanes as "  Kind/name" lines, indented by depth, with
// " (deleted)" and the group when not the family's.
func laneNames(ls []familyLane) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "%s%s/%s", strings.Repeat("  ", l.Depth), l.Kind, l.Name)
		if l.Deleted {
			b.WriteString(" (deleted)")
		}
		if l.Group != "family" {
			b.WriteString(" [" + l.Group + "]")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// shownWindow is the family view's window as drawn.
func shownWindow(t *testing.T, ctx context.Context) (from, to time.Time) {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[document.querySelector('#timeline').dataset.from, document.querySelector('#timeline').dataset.to]`))
	if err != nil {
		t.Fatal(err)
	}
	from, err1 := time.Parse(time.RFC3339Nano, s[0])
	to, err2 := time.Parse(time.RFC3339Nano, s[1])
	if err1 != nil || err2 != nil {
		t.Fatalf("the view's window %q: %v %v", s, err1, err2)
	}
	return from, to
}

// trackBox is the left edge, width and vertical middle of the first
// lane's track, in the page's pixels.
func trackBox(t *testing.T, ctx context.Context, sel string) (left, width, y float64) {
	t.Helper()
	r, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(() => { const b = document.querySelector(`+jsString(sel)+`).getBoundingClientRect(); return [b.left, b.width, b.top + b.height / 2]; })()`))
	if err != nil {
		t.Fatal(err)
	}
	return r[0], r[1], r[2]
}

// TestFamilyInBrowser shows Deployment shop/web's family from an eventsd
// whose lineage holds it (two ReplicaSets, their Pods, one deleted, the
// Node they ran on, and an unrelated Deployment): the lanes in tree order,
// indented, the deleted Pod struck through with its lifespan ended; the
// zoom by drag, wheel and reset; a new event and a new Pod arriving live;
// the Nodes toggle; an event's details; the server's warning for an
// object it does not know; and the object's own timeline still a click
// away.
func TestFamilyInBrowser(t *testing.T) {
	ctx := browser(t)
	now := time.Now()
	clk := clocktesting.NewFakeClock(now)
	g := lineage.New(lineage.Options{Clock: clk})
	g.SetLearning("")
	srv := startEventsdWith(t, true, false, func(c *server.Config) { c.Lineage = g })

	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	objs := []lineage.Object{
		{ID: "d", Kind: "Deployment", APIVersion: "apps/v1", Namespace: "shop", Name: "web", FirstSeen: ago(50 * time.Minute)},
		{ID: "rs1", Kind: "ReplicaSet", APIVersion: "apps/v1", Namespace: "shop", Name: "web-1", Owners: []lineage.ID{"d"}, FirstSeen: ago(50 * time.Minute)},
		{ID: "rs2", Kind: "ReplicaSet", APIVersion: "apps/v1", Namespace: "shop", Name: "web-2", Owners: []lineage.ID{"d"}, FirstSeen: ago(25 * time.Minute)},
		{ID: "p1", Kind: "Pod", APIVersion: "v1", Namespace: "shop", Name: "web-1-a", Owners: []lineage.ID{"rs1"}, Node: "node-1", FirstSeen: ago(49 * time.Minute)},
		{ID: "p2", Kind: "Pod", APIVersion: "v1", Namespace: "shop", Name: "web-2-a", Owners: []lineage.ID{"rs2"}, Node: "node-1", FirstSeen: ago(24 * time.Minute)},
		{ID: "n1", Kind: "Node", APIVersion: "v1", Name: "node-1", FirstSeen: ago(2 * time.Hour)},
		{ID: "e", Kind: "Deployment", APIVersion: "apps/v1", Namespace: "shop", Name: "api", FirstSeen: ago(50 * time.Minute)},
		{ID: "p3", Kind: "Pod", APIVersion: "v1", Namespace: "shop", Name: "api-1-a", Owners: []lineage.ID{"e"}, FirstSeen: ago(50 * time.Minute)},
	}
	// Observed last 20 minutes ago, when web-1-a was deleted.
	clk.SetTime(ago(20 * time.Minute))
	for _, o := range objs {
		g.Observe(o)
	}
	g.MarkDeleted("p1", time.Time{})
	clk.SetTime(now)

	seq := 0
	create := func(kind, ns, name string, uid types.UID, typ, reason string, at time.Time, count int32) {
		t.Helper()
		seq++
		first := metav1.NewTime(at)
		last := first
		if count > 1 {
			last = metav1.NewTime(at.Add(5 * time.Minute))
		}
		evNS := ns
		if evNS == "" {
			evNS = "default"
		}
		_, err := srv.cs.CoreV1().Events(evNS).Create(context.Background(), &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%d", name, seq)},
			InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name, UID: uid},
			Reason:         reason, Message: reason + " about " + kind + "/" + name, Type: typ,
			Source: corev1.EventSource{Component: "test"}, FirstTimestamp: first, LastTimestamp: last, Count: count,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	create("Deployment", "shop", "web", "d", "Normal", "ScalingReplicaSet", ago(50*time.Minute), 1)
	create("ReplicaSet", "shop", "web-1", "rs1", "Normal", "SuccessfulCreate", ago(49*time.Minute), 1)
	create("Pod", "shop", "web-1-a", "p1", "Normal", "Scheduled", ago(49*time.Minute), 1)
	create("Pod", "shop", "web-1-a", "p1", "Normal", "Killing", ago(21*time.Minute), 1)
	create("Deployment", "shop", "web", "d", "Normal", "ScalingReplicaSet", ago(25*time.Minute), 1)
	create("ReplicaSet", "shop", "web-2", "rs2", "Normal", "SuccessfulCreate", ago(25*time.Minute), 1)
	create("Pod", "shop", "web-2-a", "p2", "Warning", "BackOff", ago(15*time.Minute), 6)
	create("Node", "", "node-1", "n1", "Normal", "NodeReady", ago(30*time.Minute), 1)
	create("Deployment", "shop", "api", "e", "Normal", "ScalingReplicaSet", ago(40*time.Minute), 1)

	if err := chromedp.Do(ctx, chromedp.Navigate(srv.url+"/ui/?"+url.Values{"object": {"shop/deployment/web"}}.Encode())); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the family", `document.querySelector('#timeline').dataset.status === 'ready' && document.querySelector('#timeline').dataset.view === 'family' && document.querySelectorAll('#lanes .family-lane').length > 0`)
	title, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#timeline h1').textContent + ' | ' + document.querySelector('#status').textContent + ' | ' + (document.querySelector('#notice').hidden ? '' : document.querySelector('#notice').textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if title != "Family of shop/Deployment/web |  | " {
		t.Errorf("heading | status | notice: %q", title)
	}
	const wantTree = "Deployment/web\n  ReplicaSet/web-1\n    Pod/web-1-a (deleted)\n  ReplicaSet/web-2\n    Pod/web-2-a\n"
	ls := familyLanes(t, ctx)
	if got := laneNames(ls); got != wantTree {
		t.Fatalf("lanes:\n%s\nwant:\n%s", got, wantTree)
	}
	for i, l := range ls {
		// Indented by depth, each level the same step.
		if want := float64(l.Depth) * (ls[1].Indent - ls[0].Indent); math.Abs(l.Indent-ls[0].Indent-want) > 0.5 || ls[1].Indent <= ls[0].Indent {
			t.Errorf("lane %d (%s) indented %.1f px, the root %.1f, a level %.1f", i, l.Name, l.Indent, ls[0].Indent, ls[1].Indent-ls[0].Indent)
		}
		// The deleted Pod, and only it, struck through with a badge and
		// its lifespan ended.
		if l.Struck != l.Deleted || l.Badge != l.Deleted || l.LifeEnd != l.Deleted || !l.Life {
			t.Errorf("lane %s: deleted %v, struck through %v, badge %v, lifespan %v ended %v", l.Name, l.Deleted, l.Struck, l.Badge, l.Life, l.LifeEnd)
		}
		// Deleted 20 minutes ago: two thirds into the last hour.
		if l.Deleted && math.Abs(l.LifeEndAt-2.0/3) > 0.02 {
			t.Errorf("lane %s: its lifespan ends at %.3f of the hour, want 2/3 (deleted 20 minutes ago)", l.Name, l.LifeEndAt)
		}
	}
	wantCounts := map[string]int{"web": 2, "web-1": 1, "web-1-a": 2, "web-2": 1, "web-2-a": 6}
	for _, l := range ls {
		if l.Count != wantCounts[l.Name] {
			t.Errorf("lane %s counts %d occurrences (%v), want %d", l.Name, l.Count, l.Reasons, wantCounts[l.Name])
		}
	}

	// Zoom: a drag over the second quarter of a track shows that quarter
	// of the hour.
	from0, to0 := shownWindow(t, ctx)
	if d := to0.Sub(from0); d != time.Hour {
		t.Errorf("the default window spans %v, want 1h", d)
	}
	left, width, y := trackBox(t, ctx, "#lanes .family-lane svg.track")
	x1, x2 := left+width/4, left+width/2
	if err := chromedp.Do(ctx,
		chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, x1, y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, (x1+x2)/2, y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x2, y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, x2, y, chromedp.ButtonLeft),
	); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the dragged range", `!document.querySelector('#zoom-reset').disabled`)
	from1, to1 := shownWindow(t, ctx)
	if d := to1.Sub(from1); d < 14*time.Minute || d > 16*time.Minute || from1.Sub(from0) < 14*time.Minute || from1.Sub(from0) > 16*time.Minute {
		t.Errorf("after dragging over the second quarter: %v to %v (%v), the hour from %v", from1, to1, d, from0)
	}
	// The wheel over the axis zooms out around the pointer.
	aleft, awidth, ay := trackBox(t, ctx, "#lanes svg.axis")
	if err := chromedp.Do(ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseWheel, aleft+awidth/2, ay,
		// Chromium wants both deltas, and the protocol omits a zero.
		func(p *input.DispatchMouseEventParams) { p.DeltaX, p.DeltaY = 0.01, 400 })); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the wheel's zoom", `Date.parse(document.querySelector('#timeline').dataset.to) - Date.parse(document.querySelector('#timeline').dataset.from) > 16 * 60000`)
	from2, to2 := shownWindow(t, ctx)
	if mid1, mid2 := from1.Add(to1.Sub(from1)/2), from2.Add(to2.Sub(from2)/2); mid2.Sub(mid1).Abs() > 5*time.Second {
		t.Errorf("the wheel at the middle moved the middle from %v to %v", mid1, mid2)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#zoom-reset"))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the reset zoom", `document.querySelector('#zoom-reset').disabled`)
	if from3, to3 := shownWindow(t, ctx); to3.Sub(from3) != time.Hour {
		t.Errorf("after the reset: %v to %v, want an hour", from3, to3)
	}

	// Live: a new event on web-2-a, and a new Pod of web-2 that the
	// lineage learns, with its event.
	create("Pod", "shop", "web-2-a", "p2", "Warning", "Unhealthy", time.Now(), 1)
	waitPage(t, ctx, "Unhealthy live", `document.querySelector('#lanes .family-lane[data-name="web-2-a"] .item[data-reason="Unhealthy"]') !== null`)
	g.Observe(lineage.Object{ID: "p4", Kind: "Pod", APIVersion: "v1", Namespace: "shop", Name: "web-2-b", Owners: []lineage.ID{"rs2"}, Node: "node-1", FirstSeen: time.Now(), LastSeen: time.Now()})
	create("Pod", "shop", "web-2-b", "p4", "Normal", "Scheduled", time.Now(), 1)
	// (Its event may come before the page has read the lineage again:
	// then it is drawn in a lane after the family's until it has.)
	waitPage(t, ctx, "web-2-b's lane", `document.querySelector('#lanes .family-lane[data-group="family"][data-name="web-2-b"] .item[data-reason="Scheduled"]') !== null`)
	const wantLive = wantTree + "    Pod/web-2-b\n"
	if got := laneNames(familyLanes(t, ctx)); got != wantLive {
		t.Errorf("lanes after web-2-b joined:\n%s\nwant:\n%s", got, wantLive)
	}

	// The Nodes toggle adds node-1, with its event.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#nodes"))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "node-1's lane", `location.search.includes('nodes=1') && document.querySelector('#lanes .family-lane[data-group="node"][data-name="node-1"] .item[data-reason="NodeReady"]') !== null`)
	if got, want := laneNames(familyLanes(t, ctx)), wantLive+"Node/node-1 [node]\n"; got != want {
		t.Errorf("lanes with Nodes:\n%s\nwant:\n%s", got, want)
	}

	// Clicking a mark shows its event, as the object's timeline does.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#lanes .family-lane[data-name="web-1-a"] .item[data-reason="Killing"]`))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "Killing's details", `document.querySelector('#details').textContent.includes('Killing about Pod/web-1-a') && location.search.includes('event=')`)

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	// Kept as an artifact; docs/family.png is the demo's family
	// (TestFamilyOfTheDemo).
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "family.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}

	// The object's own timeline is the Object view.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#view button[data-view="object"]`))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the Deployment's own timeline", `document.querySelector('#timeline').dataset.view === 'object' && document.querySelector('#timeline').dataset.status === 'ready' && document.querySelectorAll('#lanes .lane[data-role]').length === 1 && document.querySelector('#lanes .lane[data-role] .reason').textContent === 'ScalingReplicaSet'`)

	// An object the lineage does not know: the server's warning is shown.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.url+"/ui/?"+url.Values{"object": {"shop/Deployment/nothing"}}.Encode())); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the warning", `document.querySelector('#timeline').dataset.status === 'ready' && !document.querySelector('#notice').hidden && document.querySelector('#notice').textContent.includes("not in eventsd's ownership lineage")`)
}

// TestFamilyOfTheDemo: eventsd --demo's Deployment shop/web has a family
// learned from its events alone (the lineage's event learner, as eventsd
// runs it, over the demo's story): its ReplicaSets and their Pods.
func TestFamilyOfTheDemo(t *testing.T) {
	ctx := browser(t)
	g := lineage.New(lineage.Options{Clock: clocktesting.NewFakeClock(time.Now())})
	// As eventsd says it without a cluster to follow (cmd/eventsd's
	// noMetadataReason).
	const learning = "ownership is learned from events only"
	g.SetLearning(learning)
	srv := startEventsdWith(t, true, false, func(c *server.Config) { c.Lineage = g })
	lctx, cancel := context.WithCancel(context.Background())
	learned := make(chan struct{})
	go func() {
		defer close(learned)
		lineage.RunEventLearner(lctx, lineage.EventLearnerOptions{Store: srv.store, Graph: g})
	}()
	dctx, stopDemo := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- demo.Run(dctx, demo.Options{Client: srv.cs, Logger: slog.New(slog.DiscardHandler)}) }()
	t.Cleanup(func() {
		stopDemo()
		if err := <-ran; err != nil {
			t.Errorf("the demo: %v", err)
		}
		cancel()
		<-learned
	})

	if err := chromedp.Do(ctx, chromedp.Navigate(srv.url+"/ui/?"+url.Values{"object": {demo.Namespace + "/deployment/" + demo.Deployment}, "zoom": {"all"}}.Encode())); err != nil {
		t.Fatal(err)
	}
	// The story is written as the page loads: read it again until the
	// crashing Pod's lane is there.
	for i := 0; ; i++ {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('#timeline').dataset.status === 'ready' && document.querySelector('#lanes .family-lane[data-name=`+jsString(demo.CrashingPod)+`] .item') !== null`, chromedp.WithPollingTimeout(5*time.Second)))
		if err == nil {
			break
		}
		if i == 5 {
			t.Fatalf("the demo's family never showed %s:\n%s", demo.CrashingPod, laneNames(familyLanes(t, ctx)))
		}
		if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
			t.Fatal(err)
		}
	}
	ls := familyLanes(t, ctx)
	t.Logf("the demo's family:\n%s", laneNames(ls))
	depth := map[string]int{}
	for _, l := range ls {
		depth[l.Kind+"/"+l.Name] = l.Depth
	}
	for _, want := range []struct {
		obj   string
		depth int
	}{
		{"Deployment/" + demo.Deployment, 0},
		{"ReplicaSet/" + demo.OldReplicaSet, 1},
		{"ReplicaSet/" + demo.NewReplicaSet, 1},
		{"Pod/" + demo.CrashingPod, 2},
	} {
		if d, ok := depth[want.obj]; !ok || d != want.depth {
			t.Errorf("%s: at depth %d (shown %v), want %d; lanes:\n%s", want.obj, d, ok, want.depth, laneNames(ls))
		}
	}
	if ls[0].Kind != "Deployment" || ls[0].Name != demo.Deployment {
		t.Errorf("the first lane is %s/%s, want the Deployment", ls[0].Kind, ls[0].Name)
	}
	// The server's warning that ownership comes from events only.
	notice, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#notice').hidden ? '' : document.querySelector('#notice').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(notice, learning) {
		t.Errorf("notice %q, want the server's warning %q", notice, learning)
	}

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "family-demo.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if *updateScreenshot {
		if err := os.WriteFile(filepath.Join("..", "docs", "family.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
