package diskindex_test

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/kubevents/kubevents/storage/diskindex"
)

// BenchmarkBuild is a reconciliation into an empty index: batches of 128
// new keys (what a new replica's first start writes), per event.
func BenchmarkBuild(b *testing.B) {
	for _, known := range []bool{false, true} {
		b.Run(map[bool]string{false: "read", true: "new"}[known], func(b *testing.B) { benchmarkBuild(b, known) })
	}
}

// openReconciling opens an empty index in a temporary directory, closed
// when b ends, and begins its reconciliation as a new replica's would.
func openReconciling(b *testing.B) *diskindex.Index {
	b.Helper()
	d, err := diskindex.Open(diskindex.Options{Dir: b.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	if err := d.BeginReconcile(id1); err != nil {
		b.Fatal(err)
	}
	return d
}

// benchmarkBuild is BenchmarkBuild with the changes marked New (as a
// reconciliation marks keys it found no record of) or not.
func benchmarkBuild(b *testing.B, known bool) {
	d := openReconciling(b)
	g := gen{rand.New(rand.NewPCG(1, 1))}
	batch := make([]diskindex.Change, 0, 128)
	b.ResetTimer()
	for i := range b.N {
		key := fmt.Sprintf("ns%d/fill-pod-%d.%x", i%10, i, i*7919)
		ev := g.event(key)
		batch = append(batch, diskindex.Change{Namespace: ev.Namespace, Name: ev.Name, Event: ev, Revision: int64(i + 1), Size: 400, Lease: int64(i / 1000), New: known})
		if len(batch) == cap(batch) || i == b.N-1 {
			if err := d.Apply(0, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// BenchmarkApplyWatch is the watch feed's Apply: batches of 64 changes
// with a revision over an index of 20,000 keys, per change: half updates
// of existing keys (a point read, changed values leave removal records),
// a quarter creates (New), a quarter deletes.
func BenchmarkApplyWatch(b *testing.B) {
	d := openReconciling(b)
	g := gen{rand.New(rand.NewPCG(1, 1))}
	const keys = 20000
	name := func(i int) (string, string) { return fmt.Sprintf("ns%d", i%10), fmt.Sprintf("pod-%d.%x", i, i*7919) }
	var batch []diskindex.Change
	for i := range keys {
		ns, n := name(i)
		batch = append(batch, diskindex.Change{Namespace: ns, Name: n, Event: g.event(ns + "/" + n), Revision: int64(i + 1), Size: 400, Lease: int64(i / 1000), New: true})
		if len(batch) == 128 {
			if err := d.Apply(0, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := d.EndReconcile(keys); err != nil {
		b.Fatal(err)
	}
	rev, next := int64(keys), keys
	live := make([]int, keys)
	for i := range live {
		live[i] = i
	}
	batch = batch[:0]
	b.ResetTimer()
	for i := range b.N {
		rev++
		var c diskindex.Change
		switch j := g.r.IntN(len(live)); i % 4 {
		case 0, 1:
			ns, n := name(live[j])
			c = diskindex.Change{Namespace: ns, Name: n, Event: g.event(ns + "/" + n), Revision: rev, Size: 400, Lease: rev / 1000}
		case 2:
			ns, n := name(next)
			live = append(live, next)
			next++
			c = diskindex.Change{Namespace: ns, Name: n, Event: g.event(ns + "/" + n), Revision: rev, Size: 400, Lease: rev / 1000, New: true}
		case 3:
			ns, n := name(live[j])
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
			c = diskindex.Change{Namespace: ns, Name: n, Delete: true, Revision: rev}
		}
		batch = append(batch, c)
		if len(batch) == 64 || i == b.N-1 {
			if err := d.Apply(rev, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}
