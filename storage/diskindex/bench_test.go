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

// benchmarkBuild is BenchmarkBuild with the changes marked New (as a
// reconciliation marks keys it found no record of) or not.
func benchmarkBuild(b *testing.B, known bool) {
	d, err := diskindex.Open(diskindex.Options{Dir: b.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	if err := d.BeginReconcile(id1); err != nil {
		b.Fatal(err)
	}
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
