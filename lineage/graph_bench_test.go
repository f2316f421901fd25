package lineage

import (
	"context"
	"crypto/sha1"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
)

// benchObjects is the size of BenchmarkGraphMemory's graph.
const benchObjects = 100_000

// realisticObjects returns n objects shaped as a cluster's: Deployments
// (names of 17 characters) each owning two ReplicaSets (28) of 48 Pods
// (34, each on one of 50 nodes), with uids of 36 characters, owners by
// uid, created over the last day.
func realisticObjects(n int) []Object {
	uid := func(key string) ID {
		h := sha1.Sum([]byte(key))
		return ID(fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16]))
	}
	created := time.Now().Add(-24 * time.Hour)
	out := make([]Object, 0, n)
	for d := 0; len(out) < n; d++ {
		dname := fmt.Sprintf("web-frontend-%04d", d)
		dep := Object{ID: uid(dname), APIVersion: "apps/v1", Kind: "Deployment", Namespace: fmt.Sprintf("team-%02d", d%40), Name: dname, FirstSeen: created}
		out = append(out, dep)
		for r := 0; r < 2 && len(out) < n; r++ {
			rname := fmt.Sprintf("%s-%010x", dname, d*2+r)
			rs := Object{ID: uid(rname), APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: dep.Namespace, Name: rname, Owners: []ID{dep.ID}, FirstSeen: created}
			out = append(out, rs)
			for p := 0; p < 48 && len(out) < n; p++ {
				pname := fmt.Sprintf("%s-%05x", rname, p)
				out = append(out, Object{ID: uid(pname), APIVersion: "v1", Kind: "Pod", Namespace: dep.Namespace, Name: pname,
					Owners: []ID{rs.ID}, Node: fmt.Sprintf("node-%02d", (d+p)%50), FirstSeen: created})
			}
		}
	}
	return out
}

// countingRecords is a RecordStore that keeps nothing and counts the
// bytes of the records saved to it.
type countingRecords struct{ records, bytes int64 }

func (c *countingRecords) Records(context.Context, string, func(string, []byte) error) error {
	return nil
}

func (c *countingRecords) SaveRecords(_ context.Context, _ string, ws []storage.RecordWrite) error {
	for _, w := range ws {
		c.records++
		c.bytes += int64(len(w.Key) + len(w.Value))
	}
	return nil
}

// heapAfterGC returns the live heap after two collections.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkGraphMemory reports what a Graph of 100,000 realistic objects
// costs: its heap per object (runtime.MemStats after GC, once flushed,
// so that nothing is pending), the bytes of its records per object (keys
// and values, as SaveRecords receives them), and the growth of a pebble
// store's directory per object once they are saved and the store closed
// (pebble's write-ahead log and tables as they are then: the records
// uncompressed in the log until a memtable flush writes them into a
// compressed table). Run it with -benchtime=1x: each iteration builds the
// whole graph.
//
//	go test ./lineage -run '^$' -bench BenchmarkGraphMemory -benchtime=1x
func BenchmarkGraphMemory(b *testing.B) {
	objs := realisticObjects(benchObjects)
	ctx := context.Background()
	var heap, recBytes, disk float64
	for range b.N {
		before := heapAfterGC()
		recs := &countingRecords{}
		g := New(Options{Store: recs})
		for _, o := range objs {
			g.Observe(o)
		}
		if err := g.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		after := heapAfterGC()
		if g.Len() != len(objs) || recs.records != int64(len(objs)) {
			b.Fatalf("the graph holds %d objects and saved %d records, want %d", g.Len(), recs.records, len(objs))
		}
		runtime.KeepAlive(g)
		heap = float64(int64(after)-int64(before)) / float64(len(objs))
		recBytes = float64(recs.bytes) / float64(len(objs))

		dir := b.TempDir()
		st, err := pebblestore.Open(pebblestore.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		empty, err := dirBytes(dir)
		if err != nil {
			b.Fatal(err)
		}
		pg := New(Options{Store: st})
		for _, o := range objs {
			pg.Observe(o)
		}
		if err := pg.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		full, err := dirBytes(dir)
		if err != nil {
			b.Fatal(err)
		}
		disk = float64(full-empty) / float64(len(objs))
	}
	b.ReportMetric(heap, "heap-bytes/object")
	b.ReportMetric(recBytes, "record-bytes/object")
	b.ReportMetric(disk, "pebble-bytes/object")
}

// dirBytes is the sum of the sizes of the files under dir.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	return n, err
}
