package etcdstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/kubevents/kubevents/storage/storagetest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestRecordsLayout: a record is <prefix>/kubevents.io/records/<space>/<key>
// holding its value byte for byte, without a lease, outside the events
// prefix kube-apiserver reads; stores of other prefixes do not share
// records.
func TestRecordsLayout(t *testing.T) {
	e := newEnv(t, nil)
	value := []byte{0, 0xff, 'k', '8', 's', 0}
	if err := e.s.SaveRecords(e.ctx, "lineage", []storage.RecordWrite{{Key: "uid-1", Value: value}}); err != nil {
		t.Fatal(err)
	}
	resp := e.get("/registry/kubevents.io/records/lineage/uid-1")
	if len(resp.Kvs) != 1 || !bytes.Equal(resp.Kvs[0].Value, value) || resp.Kvs[0].Lease != 0 {
		t.Fatalf("record key holds %v, want %q without a lease", resp.Kvs, value)
	}
	if n := len(e.getPrefix("/registry/events/").Kvs); n != 0 {
		t.Fatalf("%d keys under the events prefix after saving a record", n)
	}
	other := e.replicaWith(func(o *etcdstore.Options) { o.Prefix = "/custom" })
	if err := other.SaveRecords(e.ctx, "lineage", []storage.RecordWrite{{Key: "uid-2", Value: []byte("2")}}); err != nil {
		t.Fatal(err)
	}
	if resp := e.get("/custom/kubevents.io/records/lineage/uid-2"); len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "2" {
		t.Fatalf("record under /custom holds %v", resp.Kvs)
	}
	if got := storagetest.RecordsOf(t, e.ctx, e.s, "lineage"); len(got) != 1 || got["uid-1"] != string(value) {
		t.Fatalf("records of /registry: %q, want uid-1 only", got)
	}
	// Every replica reads them.
	if got := storagetest.RecordsOf(t, e.ctx, e.replicaWith(nil), "lineage"); len(got) != 1 {
		t.Fatalf("another replica reads %q", got)
	}
}

// TestRecordsLargeSave: a save larger than etcd's request limit (1.5 MiB
// by default) in fewer writes than its transaction limit is split by
// bytes too, and saved whole.
func TestRecordsLargeSave(t *testing.T) {
	e := newEnv(t, nil)
	const n, size = 100, 40 << 10 // 4 MB in all
	writes := make([]storage.RecordWrite, n)
	for i := range writes {
		writes[i] = storage.RecordWrite{Key: fmt.Sprintf("k%03d", i), Value: bytes.Repeat([]byte{byte('a' + i%26)}, size)}
	}
	if err := e.s.SaveRecords(e.ctx, "big", writes); err != nil {
		t.Fatalf("a save of %d records of %d bytes: %v", n, size, err)
	}
	got := storagetest.RecordsOf(t, e.ctx, e.s, "big")
	if len(got) != n {
		t.Fatalf("%d records read back, want %d", len(got), n)
	}
	for _, w := range writes {
		if got[w.Key] != string(w.Value) {
			t.Fatalf("record %s: %d bytes read back, not the %d saved", w.Key, len(got[w.Key]), len(w.Value))
		}
	}
}

// TestLeadDeposedRecordsFenced: records saved with the leading context of
// a replica that lost the leadership (its session's lease revoked, as
// when the replica is cut off) are refused with ErrConflict and nothing
// of them is written, even before the replica notices; without a leading
// context a save is not fenced.
func TestLeadDeposedRecordsFenced(t *testing.T) {
	e := newEnv(t, func(o *etcdstore.Options) { o.ElectionTTL = electionTTL })
	r := leads(t, lead(e.ctx, e.s, "lineage"), 10*time.Second)
	if err := e.s.SaveRecords(r.leading, "lineage", []storage.RecordWrite{{Key: "a", Value: []byte("1")}}); err != nil {
		t.Fatalf("the leader's records: %v", err)
	}
	keys := e.getPrefix("/registry/kubevents.io/leader/lineage/")
	if len(keys.Kvs) != 1 {
		t.Fatalf("%d candidates' keys, want 1", len(keys.Kvs))
	}
	if _, err := e.cli.Revoke(e.ctx, clientv3.LeaseID(keys.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	// Before the replica notices: its leading context's values, not its
	// liveness. Several transactions' worth: the first is refused.
	writes := make([]storage.RecordWrite, 300)
	for i := range writes {
		writes[i] = storage.RecordWrite{Key: fmt.Sprintf("late%03d", i), Value: []byte("x")}
	}
	err := e.s.SaveRecords(context.WithoutCancel(r.leading), "lineage", writes)
	if !errors.Is(err, storage.ErrConflict) || !strings.Contains(err.Error(), "no longer leads") {
		t.Fatalf("a deposed leader's records: got %v, want ErrConflict", err)
	}
	if got := storagetest.RecordsOf(t, e.ctx, e.s, "lineage"); len(got) != 1 || got["a"] != "1" {
		t.Fatalf("records after the refused save: %q, want a:1 only", got)
	}
	if err := e.s.SaveRecords(e.ctx, "lineage", []storage.RecordWrite{{Key: "a", Value: nil}}); err != nil {
		t.Fatalf("an unfenced save: %v", err)
	}
	if got := storagetest.RecordsOf(t, e.ctx, e.s, "lineage"); len(got) != 0 {
		t.Fatalf("records after deleting a: %q", got)
	}
	r.release()
}
