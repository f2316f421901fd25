package pebblebatch_test

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/storage/pebblebatch"
)

// TestSortedOrder checks that the staged writes reach the batch in
// key order, that writes of one key keep their order, and that a range
// deletion covers exactly the writes staged before it.
func TestSortedOrder(t *testing.T) {
	db, err := pebble.Open("db", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sb := pebblebatch.New(db.NewBatch())
	defer sb.Close()
	sb.Set([]byte("l5"), []byte("a"))
	sb.Set([]byte("k"), []byte("first"))
	sb.Set([]byte("l1"), []byte("trimmed"))
	sb.Delete([]byte("k"))
	sb.Set([]byte("k"), []byte("last"))
	sb.Set([]byte("j"), []byte("gone"))
	sb.Delete([]byte("j"))
	sb.DeleteRange([]byte("l0"), []byte("l3")) // drops l1, written before it
	sb.Set([]byte("l2"), []byte("after the range deletion"))
	sb.Set([]byte("a"), []byte("x"))
	if sb.Empty() {
		t.Fatal("Empty with writes staged")
	}

	var got []string
	if n := sb.Staged(); n != 2 {
		t.Fatalf("%d writes staged after the range deletion, want 2 (the range deletion flushes)", n)
	}
	sb.Flush()
	for r := sb.Batch().Reader(); ; {
		kind, k, _, ok, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, kind.String()+":"+string(k))
	}
	want := []string{
		// Staged before the range deletion, in key order; the writes of j
		// and k in their staging order.
		"SET:j", "DEL:j", "SET:k", "DEL:k", "SET:k", "SET:l1", "SET:l5",
		"RANGEDEL:l0",
		"SET:a", "SET:l2",
	}
	if len(got) != len(want) {
		t.Fatalf("batch holds %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("batch holds %v, want %v", got, want)
		}
	}

	if err := sb.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"a": "x", "k": "last", "l2": "after the range deletion", "l5": "a", "j": "", "l1": ""} {
		v, closer, err := db.Get([]byte(k))
		if errors.Is(err, pebble.ErrNotFound) {
			if want != "" {
				t.Errorf("%s: not found, want %q", k, want)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if string(v) != want {
			t.Errorf("%s = %q, want %q", k, v, want)
		}
		closer.Close()
	}
}
