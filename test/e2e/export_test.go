package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubevents/kubevents/export/otlp"
	"github.com/kubevents/kubevents/export/otlp/otlptest"
	"github.com/kubevents/kubevents/export/webhook/webhooktest"
	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// exportChange is a change eventsd acknowledged: what every sink must get.
type exportChange struct {
	typ   watch.EventType
	count int32
}

// exported is what a sink got, in arrival order (within one OTLP request,
// by revision: the OTLP exporter groups a request's records by resource).
type exported struct {
	key   string
	typ   watch.EventType
	rev   int64
	count int32
	batch int // the request it came in
}

// TestExportSurvivesKillsAndSinkOutage is the delivery test:
// 10,000 changes (creates, then count changes) written while eventsd is
// killed with SIGKILL twice and the webhook is down for 30 s. Both sinks
// (a webhook and an OTLP collector over gRPC) get every acknowledged
// change, in revision order; a change arrives twice only when a batch
// was sent again, with the same idempotency key; count changes arrive as
// updates carrying their count.
func TestExportSurvivesKillsAndSinkOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the export delivery test takes a minute")
	}
	const (
		events       = 2500
		bumps        = 3 // count changes per event: 2,500 + 7,500 = 10,000 changes
		workers      = 8
		maxRecords   = 200
		outage       = 30 * time.Second
		firstKill    = 3000
		outageStarts = 4000
		secondKill   = 6500
	)
	wh := webhooktest.New(t, webhooktest.Options{})
	col := otlptest.Start(t, otlptest.Options{})
	dir := t.TempDir()
	config := filepath.Join(dir, "export.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `apiVersion: eventsd.kubevents.io/v1alpha1
kind: ExportConfiguration
sinks:
- name: hook
  batch: {maxRecords: %d, maxWait: 200ms}
  webhook: {url: %q}
- name: collector
  batch: {maxRecords: %d, maxWait: 200ms}
  otlp: {endpoint: %q, insecure: true}
`, maxRecords, wh.URL(), maxRecords, col.GRPCEndpoint()), 0o600); err != nil {
		t.Fatal(err)
	}
	p := eventsdtest.Start(t, eventsdtest.Options{Args: []string{"--export-config", config, "--event-ttl", "24h"}})
	cs := p.Clientset()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	var (
		mu      sync.Mutex
		acked   = map[string]exportChange{}
		changes atomic.Int64
		kills   sync.WaitGroup
	)
	ack := func(ev *corev1.Event, typ watch.EventType) {
		mu.Lock()
		acked[string(ev.UID)+"/"+ev.ResourceVersion] = exportChange{typ: typ, count: ev.Count}
		mu.Unlock()
		switch changes.Add(1) {
		case firstKill, secondKill:
			kills.Add(1)
			go func() {
				defer kills.Done()
				p.Kill()
				p.Restart()
			}()
		case outageStarts:
			wh.Down()
			time.AfterFunc(outage, func() {
				if err := wh.Up(); err != nil {
					t.Errorf("webhook receiver back up: %v", err)
				}
			})
		}
	}
	// retry runs op until it succeeds; eventsd is down now and then.
	retry := func(what string, op func() error) {
		for {
			err := op()
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Errorf("%s: %v (gave up: %v)", what, err, ctx.Err())
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < events; i += workers {
				name := fmt.Sprintf("export-%05d", i)
				retry("create "+name, func() error {
					ev, err := cs.CoreV1().Events("default").Create(ctx, &corev1.Event{
						ObjectMeta:     metav1.ObjectMeta{Name: name},
						InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-" + strconv.Itoa(i%50)},
						Reason:         "BackOff", Message: "Back-off restarting failed container", Type: corev1.EventTypeWarning,
						Count: 1, Source: corev1.EventSource{Component: "kubelet"},
					}, metav1.CreateOptions{})
					if apierrors.IsAlreadyExists(err) {
						return nil // stored by an attempt whose answer was lost: not acknowledged
					}
					if err == nil {
						ack(ev, watch.Added)
					}
					return err
				})
			}
		}()
	}
	wg.Wait()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < events; i += workers {
				name := fmt.Sprintf("export-%05d", i)
				for range bumps {
					retry("bump "+name, func() error { return bumpCount(ctx, cs, name, ack) })
				}
			}
		}()
	}
	wg.Wait()
	kills.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d changes acknowledged", len(acked))

	// Every sink gets every acknowledged change.
	deadline := time.Now().Add(2 * time.Minute)
	for _, sink := range []struct {
		name string
		got  func() []exported
	}{
		{"webhook", func() []exported { return webhookExported(wh) }},
		{"otlp", func() []exported { return otlpExported(col) }},
	} {
		var got []exported
		for {
			got = sink.got()
			if missing := missingKeys(acked, got); len(missing) == 0 {
				break
			} else if time.Now().After(deadline) {
				t.Errorf("%s: %d of %d acknowledged changes never arrived, e.g. %v", sink.name, len(missing), len(acked), missing[:min(5, len(missing))])
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		checkExported(t, sink.name, acked, got, maxRecords)
	}
	if t.Failed() {
		t.Logf("eventsd log:\n%s", p.Logs())
	}
}

// bumpCount raises the event's count by one, as a recorder does for a
// repeat, and acknowledges the update.
func bumpCount(ctx context.Context, cs kubernetes.Interface, name string, ack func(*corev1.Event, watch.EventType)) error {
	ev, err := cs.CoreV1().Events("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ev.Count++
	out, err := cs.CoreV1().Events("default").Update(ctx, ev, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	ack(out, watch.Modified)
	return nil
}

func missingKeys(acked map[string]exportChange, got []exported) []string {
	have := make(map[string]bool, len(got))
	for _, g := range got {
		have[g.key] = true
	}
	var missing []string
	for k := range acked {
		if !have[k] {
			missing = append(missing, k)
		}
	}
	slices.Sort(missing)
	return missing
}

// checkExported checks one sink's deliveries: acknowledged changes arrive
// as what they were; first arrivals come in revision order; a key that
// arrives again comes as the same change, in a batch sent again (at most
// one batch's worth of records per resend).
func checkExported(t *testing.T, sink string, acked map[string]exportChange, got []exported, maxRecords int) {
	t.Helper()
	seen := map[string]exported{}
	var lastRev int64
	dups, resentBatches := 0, map[int]bool{}
	for _, g := range got {
		if prev, dup := seen[g.key]; dup {
			dups++
			resentBatches[g.batch] = true
			if prev.typ != g.typ || prev.rev != g.rev || prev.count != g.count {
				t.Errorf("%s: key %s arrived as %v, then as %v", sink, g.key, prev, g)
			}
			continue
		}
		seen[g.key] = g
		if g.rev <= lastRev {
			t.Errorf("%s: revision %d (%s) arrived after %d", sink, g.rev, g.key, lastRev)
		}
		lastRev = g.rev
		if want, ok := acked[g.key]; ok && (want.typ != g.typ || want.count != g.count) {
			t.Errorf("%s: %s arrived as %s count %d, acknowledged as %s count %d", sink, g.key, g.typ, g.count, want.typ, want.count)
		}
	}
	if dups > len(resentBatches)*maxRecords {
		t.Errorf("%s: %d duplicates in %d batches", sink, dups, len(resentBatches))
	}
	t.Logf("%s: %d records, %d distinct, %d duplicates (in %d resent batches)", sink, len(got), len(seen), dups, len(resentBatches))
}

func webhookExported(r *webhooktest.Receiver) []exported {
	var out []exported
	for i, q := range r.Requests() {
		if q.Status/100 != 2 {
			continue
		}
		for _, rec := range q.Records {
			out = append(out, exported{key: rec.Key, typ: rec.Type, rev: rec.Revision, count: rec.Event.Count, batch: i})
		}
	}
	return out
}

func otlpExported(r *otlptest.Receiver) []exported {
	var out []exported
	var batch []exported
	flush := func() {
		slices.SortFunc(batch, func(a, b exported) int { return int(a.rev - b.rev) })
		out = append(out, batch...)
		batch = batch[:0]
	}
	// Records() is in arrival order; a request's records share their
	// request index.
	for _, rec := range r.Records() {
		e := exported{batch: rec.Request}
		e.key, _ = rec.Attributes[otlp.AttrIdempotencyKey].(string)
		typ, _ := rec.Attributes[otlp.AttrChangeType].(string)
		e.typ = watch.EventType(typ)
		e.rev, _ = rec.Attributes[otlp.AttrRevision].(int64)
		c, _ := rec.Attributes[otlp.AttrEventCount].(int64)
		e.count = int32(c)
		if len(batch) > 0 && batch[0].batch != e.batch {
			flush()
		}
		batch = append(batch, e)
	}
	flush()
	return out
}

// TestExportOnEtcdReplicas: two eventsd replicas over one etcd with the
// same export configuration export once, not twice: one leads the export
// (eventsd_export_leader), and when it is killed the other takes over
// from the shared cursor, so every acknowledged change arrives, in order,
// with no duplicates but a resent batch.
func TestExportOnEtcdReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: waits out an etcd session TTL")
	}
	wh := webhooktest.New(t, webhooktest.Options{})
	config := filepath.Join(t.TempDir(), "export.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `apiVersion: eventsd.kubevents.io/v1alpha1
kind: ExportConfiguration
sinks:
- name: hook
  batch: {maxRecords: 50, maxWait: 100ms}
  webhook: {url: %q}
`, wh.URL()), 0o600); err != nil {
		t.Fatal(err)
	}
	r := etcdStartReplicas(t, 2, "--export-config", config)
	leaderOf := func() int {
		leader := -1
		for i, p := range r.procs {
			if scrape(t, p.URL+"/metrics")["eventsd_export_leader"] == 1 {
				if leader >= 0 {
					t.Fatalf("replicas %d and %d both export", leader, i)
				}
				leader = i
			}
		}
		return leader
	}
	eventuallyE2E(t, func() bool { return leaderOf() >= 0 }, "a replica leading the export")
	leader := leaderOf()
	ctx := t.Context()
	acked := map[string]exportChange{}
	create := func(p *eventsdtest.Process, name string) {
		t.Helper()
		ev, err := p.Clientset().CoreV1().Events("default").Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name},
			InvolvedObject: etcdPod("default", "web"), Reason: "Pulled", Message: "m", Type: corev1.EventTypeNormal, Count: 1,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		acked[string(ev.UID)+"/"+ev.ResourceVersion] = exportChange{typ: watch.Added, count: 1}
	}
	for i := range 100 {
		create(r.procs[i%2], fmt.Sprintf("before-%03d", i))
	}
	r.procs[leader].Kill()
	survivor := r.procs[1-leader]
	for i := range 100 {
		create(survivor, fmt.Sprintf("after-%03d", i))
	}
	eventuallyE2E(t, func() bool { return scrape(t, survivor.URL+"/metrics")["eventsd_export_leader"] == 1 }, "the survivor taking the export over")
	deadline := time.Now().Add(30 * time.Second)
	var got []exported
	for {
		got = webhookExported(wh)
		if missing := missingKeys(acked, got); len(missing) == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged changes never arrived, e.g. %v", len(missing), len(acked), missing[:min(5, len(missing))])
		}
		time.Sleep(100 * time.Millisecond)
	}
	checkExported(t, "webhook", acked, got, 50)
	if len(got) > len(acked)+50 {
		t.Errorf("%d records for %d changes: exported more than once", len(got), len(acked))
	}
}
