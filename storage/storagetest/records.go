package storagetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage"
	clocktesting "k8s.io/utils/clock/testing"
)

// The cases of storage.RecordStore; a backend without one skips them.

func recordStore(t *testing.T, s storage.Interface) storage.RecordStore {
	t.Helper()
	rs, ok := s.(storage.RecordStore)
	if !ok {
		t.Skip("the backend keeps no records")
	}
	return rs
}

// RecordsOf returns the records of space in rs as key → value, failing
// t if Records fails: for backends' own record tests.
func RecordsOf(t testing.TB, ctx context.Context, rs storage.RecordStore, space string) map[string]string {
	t.Helper()
	got := map[string]string{}
	if err := rs.Records(ctx, space, func(k string, v []byte) error {
		got[k] = string(v)
		return nil
	}); err != nil {
		t.Fatalf("records of %q: %v", space, err)
	}
	return got
}

// record is one record as Records returned it.
type record struct{ key, value string }

// readRecords returns the records of space in the order Records gave
// them.
func readRecords(t *testing.T, ctx context.Context, rs storage.RecordStore, space string) []record {
	t.Helper()
	var got []record
	if err := rs.Records(ctx, space, func(key string, value []byte) error {
		got = append(got, record{key, string(value)})
		return nil
	}); err != nil {
		t.Fatalf("records of %q: %v", space, err)
	}
	return got
}

func equalRecords(t *testing.T, what string, got, want []record) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func put(key, value string) storage.RecordWrite {
	return storage.RecordWrite{Key: key, Value: []byte(value)}
}

func del(key string) storage.RecordWrite { return storage.RecordWrite{Key: key} }

// testRecords: records read back in key order as saved, a nil value
// deletes (a missing key too, without error), an empty value is a record,
// spaces are independent, an error of fn ends the scan and is returned,
// and records are not events: not listed, watched or counted, and (on a
// store whose revisions are its events') they take no revision.
func testRecords(t *testing.T, h Harness) {
	f := open(t, h, nil)
	rs := recordStore(t, f.s)
	p := f.probeEvents()
	equalRecords(t, "a space never written", readRecords(t, f.ctx, rs, "lineage"), nil)

	save := func(space string, writes ...storage.RecordWrite) {
		t.Helper()
		if err := rs.SaveRecords(f.ctx, space, writes); err != nil {
			t.Fatalf("save %v to %q: %v", writes, space, err)
		}
	}
	// Given out of order: read back in key order (bytewise).
	save("lineage", put("uid-c", "3"), put("uid-a", "1"), put("uid-B", "upper"), put("uid-b", "2"), put("uid-a0", ""))
	save("other", put("uid-a", "elsewhere"), put("x", "y"))
	want := []record{{"uid-B", "upper"}, {"uid-a", "1"}, {"uid-a0", ""}, {"uid-b", "2"}, {"uid-c", "3"}}
	equalRecords(t, "after the first save", readRecords(t, f.ctx, rs, "lineage"), want)
	equalRecords(t, "another space", readRecords(t, f.ctx, rs, "other"), []record{{"uid-a", "elsewhere"}, {"x", "y"}})
	// "lineage" is a prefix of "lineage-2": neither sees the other's.
	save("lineage-2", put("uid-a", "two"))
	equalRecords(t, "a space whose name extends another's", readRecords(t, f.ctx, rs, "lineage-2"), []record{{"uid-a", "two"}})

	// Overwrite, delete, delete a missing key, all in one call.
	save("lineage", put("uid-a", "1bis"), del("uid-b"), del("uid-missing"), put("uid-d", "4"))
	want = []record{{"uid-B", "upper"}, {"uid-a", "1bis"}, {"uid-a0", ""}, {"uid-c", "3"}, {"uid-d", "4"}}
	equalRecords(t, "after overwriting and deleting", readRecords(t, f.ctx, rs, "lineage"), want)
	equalRecords(t, "the other space after the deletes", readRecords(t, f.ctx, rs, "other"), []record{{"uid-a", "elsewhere"}, {"x", "y"}})
	save("lineage", del("uid-missing"))
	save("lineage")
	equalRecords(t, "after deleting only a missing key", readRecords(t, f.ctx, rs, "lineage"), want)

	// fn's error ends the scan.
	stop := errors.New("enough")
	n := 0
	err := rs.Records(f.ctx, "lineage", func(string, []byte) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 2 {
		t.Fatalf("fn failing at its second record: Records returned %v after %d calls; want its error after 2", err, n)
	}

	f.checkNotEvents(h, p, "records")
}

// testRecordsInvalid: a bad space or key is refused with
// storage.ErrInvalidRecord, and a call with one bad write writes none of
// its writes.
func testRecordsInvalid(t *testing.T, h Harness) {
	f := open(t, h, nil)
	rs := recordStore(t, f.s)
	if err := rs.SaveRecords(f.ctx, "lineage", []storage.RecordWrite{put("kept", "1")}); err != nil {
		t.Fatal(err)
	}
	for _, space := range []string{"", "Lineage", "a/b", "a_b", "a:b", "a b", "é", strings.Repeat("a", storage.MaxRecordSpace+1)} {
		if err := rs.SaveRecords(f.ctx, space, []storage.RecordWrite{put("k", "v")}); !errors.Is(err, storage.ErrInvalidRecord) {
			t.Errorf("save to space %q: got %v, want ErrInvalidRecord", space, err)
		}
		called := false
		if err := rs.Records(f.ctx, space, func(string, []byte) error { called = true; return nil }); !errors.Is(err, storage.ErrInvalidRecord) || called {
			t.Errorf("records of space %q: got %v (fn called: %v), want ErrInvalidRecord", space, err, called)
		}
	}
	// The longest valid names are valid.
	longSpace, longKey := strings.Repeat("a", storage.MaxRecordSpace), strings.Repeat("k", storage.MaxRecordKey)
	if err := rs.SaveRecords(f.ctx, longSpace, []storage.RecordWrite{put(longKey, "v")}); err != nil {
		t.Fatalf("save of the longest space and key: %v", err)
	}
	equalRecords(t, "the longest space", readRecords(t, f.ctx, rs, longSpace), []record{{longKey, "v"}})
	for _, bad := range [][]storage.RecordWrite{
		{put("fine", "1"), put("", "empty key")},
		{put("fine", "1"), put("a/b", "slash")},
		{put("fine", "1"), del("a/b")},
		{put("fine", "1"), put(strings.Repeat("k", storage.MaxRecordKey+1), "long")},
		{put("fine", "1"), put("twice", "1"), del("twice")},
	} {
		if err := rs.SaveRecords(f.ctx, "lineage", bad); !errors.Is(err, storage.ErrInvalidRecord) {
			t.Errorf("save of %v: got %v, want ErrInvalidRecord", bad, err)
		}
	}
	equalRecords(t, "after the refused saves", readRecords(t, f.ctx, rs, "lineage"), []record{{"kept", "1"}})
}

// testRecordsMany: a save of more writes than one etcd transaction holds
// (128 by default) and a space of more records than one page of a read
// are applied and read whole, and a scan sees one moment: saves made
// while it runs do not show in it.
func testRecordsMany(t *testing.T, h Harness) {
	f := open(t, h, nil)
	rs := recordStore(t, f.s)
	const n = 1100
	writes := make([]storage.RecordWrite, n)
	for i := range writes {
		writes[i] = put(fmt.Sprintf("k%05d", i), strings.Repeat("v", i%200))
	}
	if err := rs.SaveRecords(f.ctx, "many", writes); err != nil {
		t.Fatal(err)
	}
	i := 0
	err := rs.Records(f.ctx, "many", func(key string, value []byte) error {
		if i == 0 {
			// Delete the last and add one after it while the scan runs.
			if err := rs.SaveRecords(f.ctx, "many", []storage.RecordWrite{del(fmt.Sprintf("k%05d", n-1)), put("z", "late")}); err != nil {
				return err
			}
		}
		if wantKey, wantLen := fmt.Sprintf("k%05d", i), i%200; key != wantKey || len(value) != wantLen {
			return fmt.Errorf("record %d: %q with %d bytes, want %q with %d", i, key, len(value), wantKey, wantLen)
		}
		i++
		return nil
	})
	if err != nil || i != n {
		t.Fatalf("scan: %v after %d records, want %d", err, i, n)
	}
	got := readRecords(t, f.ctx, rs, "many")
	if len(got) != n || got[n-2].key != fmt.Sprintf("k%05d", n-2) || got[n-1] != (record{"z", "late"}) {
		t.Fatalf("after the save during the scan: %d records ending with %v, want %d ending with k%05d and z", len(got), got[max(0, len(got)-2):], n, n-2)
	}
	dels := make([]storage.RecordWrite, 0, n)
	for _, r := range got {
		dels = append(dels, del(r.key))
	}
	if err := rs.SaveRecords(f.ctx, "many", dels); err != nil {
		t.Fatal(err)
	}
	equalRecords(t, "after deleting them all", readRecords(t, f.ctx, rs, "many"), nil)
}

// testRecordsReopen: saved records survive closing and reopening the
// store over the same data; a closed store refuses both calls with
// ErrClosed.
func testRecordsReopen(t *testing.T, h Harness) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := Options{Clock: clk, DefaultTTL: time.Hour, HistoryMaxEvents: 1 << 20, ExpiryInterval: time.Second, HistoryWindow: suiteHistoryWindow}
	dir := t.TempDir()
	ctx := context.Background()
	s := h.Open(t, dir, opts)
	rs := recordStore(t, s)
	if _, err := s.Create(ctx, ev("default", "a"), storage.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rs.SaveRecords(ctx, "lineage", []storage.RecordWrite{put("a", "1"), put("b", "2"), put("c", "3")}); err != nil {
		t.Fatal(err)
	}
	if err := rs.SaveRecords(ctx, "lineage", []storage.RecordWrite{del("b")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rs.SaveRecords(ctx, "lineage", []storage.RecordWrite{put("d", "4")}); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("save after close: got %v, want ErrClosed", err)
	}
	if err := rs.Records(ctx, "lineage", func(string, []byte) error { return nil }); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("read after close: got %v, want ErrClosed", err)
	}
	s = h.Open(t, dir, opts)
	defer s.Close()
	equalRecords(t, "after reopen", readRecords(t, ctx, recordStore(t, s), "lineage"), []record{{"a", "1"}, {"c", "3"}})
	if st := s.Stats(); st.Events != 1 {
		t.Fatalf("%d events after reopen, want 1", st.Events)
	}
}
