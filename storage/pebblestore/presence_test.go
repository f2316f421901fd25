package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPresenceAgainstAMap drives the set with random adds and removes,
// through growth and long probe clusters, checking it against a map: a
// stored key is always reported present.
func TestPresenceAgainstAMap(t *testing.T) {
	p := newPresence(0)
	held := map[string]int{}
	rng := rand.New(rand.NewPCG(1, 2))
	key := func(i int) []byte { return []byte(fmt.Sprintf("odefault/e%d", i)) }
	for step := 0; step < 200_000; step++ {
		i := rng.IntN(20_000)
		k := key(i)
		if rng.IntN(3) > 0 {
			p.add(k)
			held[string(k)]++
		} else if held[string(k)] > 0 {
			p.remove(k)
			held[string(k)]--
		}
		if step%997 == 0 {
			for s, c := range held {
				if c > 0 && !p.mayContain([]byte(s)) {
					t.Fatalf("step %d: %s is held %d times but reported absent", step, s, c)
				}
			}
		}
	}
	total := 0
	for _, c := range held {
		total += c
	}
	if p.n != total {
		t.Fatalf("set holds %d entries, the model %d", p.n, total)
	}
	// Absent keys are almost always reported absent.
	falsePos := 0
	for i := 0; i < 10_000; i++ {
		if p.mayContain([]byte(fmt.Sprintf("oother/x%d", i))) {
			falsePos++
		}
	}
	if falsePos > 5 {
		t.Fatalf("%d of 10000 absent keys reported present", falsePos)
	}
}

func TestPresenceRemovesOneOfTwo(t *testing.T) {
	p := newPresence(0)
	a := []byte("odefault/a")
	p.add(a)
	p.add(a)
	p.remove(a)
	if !p.mayContain(a) {
		t.Fatal("one of two entries was removed, and the key is gone")
	}
	p.remove(a)
	if p.mayContain(a) || p.n != 0 {
		t.Fatal("removed key still present")
	}
	if u := (&presence{unknown: true}); !u.mayContain(a) {
		t.Fatal("an unknown set must answer maybe")
	}
}

// TestPresenceSavedByClose checks the set Close saves for the next Open:
// a clean restart takes it instead of scanning, with the same keys and
// namespace counts a scan finds, and removes the file; a file that does
// not match the database (saved before later writes) or is damaged is
// not used, and the scan gives the same answers.
func TestPresenceSavedByClose(t *testing.T) {
	fs := vfs.NewMem()
	open := func() *Store {
		t.Helper()
		s, err := Open(Options{Dir: "data", FS: fs, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()
	create := func(s *Store, ns string, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("e%04d", i)}, Reason: "R"}
			if _, err := s.Create(ctx, ev, storage.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// check compares the store's set and counts with what a scan of its
	// database finds, and that an existing key cannot be created again.
	check := func(s *Store, wantLoaded bool, want map[string]int64) {
		t.Helper()
		if s.presenceLoaded != wantLoaded {
			t.Errorf("presence loaded from the file: %v, want %v", s.presenceLoaded, wantLoaded)
		}
		scanned, counts, err := loadPresence(s.db, s.count)
		if err != nil {
			t.Fatal(err)
		}
		if s.presence.n != scanned.n || s.presence.unknown {
			t.Errorf("the set holds %d keys (unknown %v), a scan %d", s.presence.n, s.presence.unknown, scanned.n)
		}
		s.viewMu.Lock()
		got := maps.Clone(s.namespaces)
		s.viewMu.Unlock()
		if !maps.Equal(got, want) || !maps.Equal(counts, want) {
			t.Errorf("namespace counts %v, scanned %v, want %v", got, counts, want)
		}
		for ns, n := range want {
			for i := range int(n) {
				if !s.presence.mayContain([]byte("o" + ns + "/" + fmt.Sprintf("e%04d", i))) {
					t.Fatalf("%s/e%04d is stored and reported absent", ns, i)
				}
			}
		}
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "e0000"}, Reason: "R"}
		if _, err := s.Create(ctx, ev, storage.WriteOptions{}); !errors.Is(err, storage.ErrExists) {
			t.Errorf("creating a stored key: %v, want ErrExists", err)
		}
		if _, err := fs.Stat(fs.PathJoin("data", presenceFile)); err == nil {
			t.Error("the presence file is still there after open")
		}
	}

	s := open()
	create(s, "a", 0, 300)
	create(s, "b", 0, 50)
	check(s, false, map[string]int64{"a": 300, "b": 50})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	saved, err := fs.Open(fs.PathJoin("data", presenceFile))
	if err != nil {
		t.Fatalf("Close saved no presence file: %v", err)
	}
	old, err := io.ReadAll(saved)
	saved.Close()
	if err != nil {
		t.Fatal(err)
	}

	s = open()
	check(s, true, map[string]int64{"a": 300, "b": 50})
	create(s, "b", 50, 60)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The file of the first close, put back: its revision is not the
	// database's, so the store scans.
	put := func(b []byte) {
		t.Helper()
		f, err := fs.Create(fs.PathJoin("data", presenceFile), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	put(old)
	s = open()
	check(s, false, map[string]int64{"a": 300, "b": 60})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A damaged file (one slot changed): the checksum says so.
	f, err := fs.Open(fs.PathJoin("data", presenceFile))
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := io.ReadAll(f)
	f.Close()
	cur[len(presenceMagic)+40] ^= 0xff
	put(cur)
	s = open()
	defer s.Close()
	check(s, false, map[string]int64{"a": 300, "b": 60})
}
