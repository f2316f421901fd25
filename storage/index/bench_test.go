package index

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Shape of the realistic events of realisticEvent.
const (
	eventsPerPod  = 8    // Scheduled, Pulling, Pulled, Created, Started, ...
	namespaces    = 100  // team-00 … team-99
	nodes         = 1000 // reportingInstance / source host of kubelet events
	relatedEvery  = 20   // one event in 20 has a related object
	schedulerStep = 0    // the first event of each pod is the scheduler's
)

// realisticEvent returns the i-th of a stream of events shaped like a
// cluster's: pods of deployments in 100 namespaces, each with 8 events
// (the scheduler's Scheduled with action Binding, then the kubelet's,
// legacy-style, one in 10 a Warning), names as client-go's recorder makes
// them (<pod>.<hex nanoseconds>), uids as UUIDs, node names as on EC2.
func realisticEvent(i int) (key string, ev *corev1.Event) {
	podN := i / eventsPerPod
	step := i % eventsPerPod
	ns := fmt.Sprintf("team-%02d", podN%namespaces)
	pod := fmt.Sprintf("checkout-%010x-%05x", uint64(podN/5)*2654435761%(1<<40), uint64(podN)*40503%(1<<20))
	node := fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", podN%nodes/250, podN%nodes%250)
	ts := time.Unix(1_700_000_000, 0).Add(time.Duration(i) * 7919 * time.Microsecond)
	ev = &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s.%x", pod, ts.UnixNano())},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod, APIVersion: "v1",
			UID: types.UID(fmt.Sprintf("6c1d2f0e-3b7a-4c55-%04x-%012x", podN%65536, uint64(podN)*2862933555777941757%(1<<48)))},
		Reason: []string{"Scheduled", "Pulling", "Pulled", "Created", "Started", "Killing", "Unhealthy", "BackOff"}[step],
		Type:   corev1.EventTypeNormal,
	}
	if step == schedulerStep {
		ev.ReportingController, ev.ReportingInstance, ev.Action = "default-scheduler", "default-scheduler-control-plane-1", "Binding"
	} else {
		ev.Source = corev1.EventSource{Component: "kubelet", Host: node}
		ev.ReportingController, ev.ReportingInstance = "kubelet", node
	}
	if i%10 == 9 {
		ev.Type = corev1.EventTypeWarning
	}
	if i%relatedEvery == 3 {
		ev.Related = &corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(fmt.Sprintf("0b6c6a1e-99aa-4c0e-8f00-%012d", podN%nodes))}
	}
	return ns + "/" + ev.Name, ev
}

// rss returns the process's resident set size, or 0 where /proc does not
// tell (it is Linux's).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkMemoryBytesPerEvent builds a Memory of All() over 1M realistic
// events (100k with -short) and reports the heap it holds per event
// (HeapAlloc after a GC, before and after), the resident memory per event
// once the build's garbage is returned to the OS as etcdstore does
// (RSS-B/event, Linux only; run it alone with -benchtime=1x: the RSS
// before is taken once), the time that takes (ms/FreeOSMemory), the CPU
// per Put, the time of a
// lookup of one pod's events by involves.uid and of a page of 500 keys
// among 900k, and the heap per event once the removals of a 5-minute
// window of TTL expiry (1 hour) are kept too.
func BenchmarkMemoryBytesPerEvent(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	debug.FreeOSMemory()
	rssBefore := rss()
	for b.Loop() {
		before := heapAlloc()
		m := NewMemory(All())
		start := time.Now()
		for i := range n {
			_, ev := realisticEvent(i)
			m.Put(ev, int64(i+1))
		}
		put := time.Since(start)
		start = time.Now()
		debug.FreeOSMemory()
		b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "ms/FreeOSMemory")
		if rssBefore > 0 {
			b.ReportMetric(float64(rss()-rssBefore)/float64(n), "RSS-B/event")
		}
		after := heapAlloc()
		b.ReportMetric(float64(after-before)/float64(n), "B/event")
		b.ReportMetric(float64(put.Nanoseconds())/float64(n), "ns/put(incl.gen)")

		const lookups = 10_000
		start = time.Now()
		for i := range lookups {
			_, ev := realisticEvent((i * 7919 % (n / eventsPerPod)) * eventsPerPod)
			sel := storage.Selector{Fields: eventapi.FieldSelector{{Field: eventapi.FieldInvolvesUID, Value: string(ev.InvolvedObject.UID)}}}
			keys, _, err := m.Keys(m.Set().Plan(sel), 0, "", 0)
			if err != nil || len(keys) != eventsPerPod {
				b.Fatalf("lookup of %s: %d keys, %v", ev.InvolvedObject.UID, len(keys), err)
			}
		}
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/lookups, "ns/lookup(incl.gen)")

		// A page of 500 of the 90% of events whose type is Normal: the
		// cost is in the page, not in the matches.
		const pages = 1_000
		normal := All().Plan(storage.Selector{Fields: eventapi.FieldSelector{{Field: eventapi.FieldType, Value: "Normal"}}})
		start = time.Now()
		for i := range pages {
			after, _ := realisticEvent(i * 7919 % n)
			if keys, _, err := m.Keys(normal, 0, after, 500); err != nil || len(keys) == 0 {
				b.Fatalf("page after %s: %d keys, %v", after, len(keys), err)
			}
		}
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/pages, "ns/page500")

		// Steady state with a 1-hour TTL and etcd's 5-minute compaction:
		// the removals of the last twelfth of the events are kept.
		for i := range n / 12 {
			key, _ := realisticEvent(i)
			deleteKey(m, key, int64(n+2*i))
			key, ev := realisticEvent(n + i)
			m.Put(ev, int64(n+2*i+1))
		}
		b.ReportMetric(float64(heapAlloc()-before)/float64(n), "B/event(churn)")
		runtime.KeepAlive(m)
	}
}

// BenchmarkMemoryKeys: one page of 500 keys of a field selector (a third
// of 100,000 events match it) from the in-memory index: the lookup's
// stream merged by MergeKeys.
func BenchmarkMemoryKeys(b *testing.B) {
	m := NewMemory(All())
	for i := range 100000 {
		m.Put(event(fmt.Sprintf("ns%d/e%06d", i%10, i), func(ev *corev1.Event) {
			ev.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Namespace: ev.Namespace, Name: fmt.Sprintf("p%d", i%2000), UID: types.UID(strconv.Itoa(i % 2000))}
			ev.Reason = []string{"Pulled", "Started", "BackOff"}[i%3]
		}), int64(i+1))
	}
	f, err := eventapi.ParseFieldSelector(eventapi.CoreV1, "reason=Started", true)
	if err != nil {
		b.Fatal(err)
	}
	plan := m.Set().Plan(storage.Selector{Fields: f})
	for b.Loop() {
		if keys, _, err := m.Keys(plan, 0, "", 500); err != nil || len(keys) != 500 {
			b.Fatalf("%d keys, %v", len(keys), err)
		}
	}
}
