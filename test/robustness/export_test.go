package robustness

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubevents/kubevents/export"
)

// The export checker must be able to fail too: validExport is what a
// sink gets of validHistory's changes (k1 created at 5, k2 at 6, k1
// updated at 7 and deleted at 9), with a batch sent again after a
// restart; each test below breaks it once.

// exportRecord is a record of the change of name at rev, as the exporter
// builds it.
func exportRecord(typ watch.EventType, name string, rev int64, msg, reason, uid string) export.Record {
	ev := &corev1.Event{
		TypeMeta:       metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), ResourceVersion: strconv.FormatInt(rev, 10)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p"},
		Reason:         reason,
		Message:        msg,
	}
	return export.Record{Key: export.KeyOf(ev, rev), Type: typ, Revision: rev, Event: ev}
}

func validExport() []ExportBatch {
	k1a := exportRecord(watch.Added, "k1", 5, "a", "R0", "u1")
	k2 := exportRecord(watch.Added, "k2", 6, "b", "R1", "u2")
	k1c := exportRecord(watch.Modified, "k1", 7, "c", "R1", "u1")
	k1d := exportRecord(watch.Deleted, "k1", 9, "c", "R1", "u1")
	other := exportRecord(watch.Added, "x", 8, "z", "R0", "u3")
	other.Event.Namespace = "elsewhere"
	return []ExportBatch{
		{Records: []export.Record{k1a, k2}, Acked: false}, // 503
		{Records: []export.Record{k1a, k2}, Acked: true},  // sent again
		{Records: []export.Record{k1c, other}, Acked: true},
		// eventsd killed before saving its cursor past 7: sent again
		// from 6, with the next change.
		{Records: []export.Record{k1c, other, k1d}, Acked: true},
	}
}

func exportLog(t *testing.T) *ChangeLog {
	t.Helper()
	l, vs := BuildChangeLog(validHistory())
	if len(vs) > 0 {
		t.Fatal(vs)
	}
	return l
}

func checkExport(t *testing.T, batches []ExportBatch) ExportReport {
	t.Helper()
	return CheckExport(exportLog(t), batches, ExportCheck{Namespace: ns, From: 4, Until: 9})
}

func wantExportViolation(t *testing.T, r ExportReport, check, detail string) {
	t.Helper()
	for _, v := range r.Violations {
		if v.Check == check && strings.Contains(v.Detail, detail) {
			return
		}
	}
	t.Errorf("no %s violation mentioning %q; report: %s %v", check, detail, r.Summary(), r.Violations)
}

func TestCheckersExportPassesValid(t *testing.T) {
	r := checkExport(t, validExport())
	if len(r.Violations) > 0 {
		t.Fatalf("valid export reported: %s %v", r.Summary(), r.Violations)
	}
	if r.Batches != 4 || r.Acked != 3 || r.Records != 5 || r.Redelivered != 1 || r.Owed != 4 || r.Excused != 0 {
		t.Errorf("counts: %s", r.Summary())
	}
}

// The deletion at 9 never acknowledged: its batch failed and was not
// sent again.
func TestCheckersExportReportsLostChange(t *testing.T) {
	b := validExport()
	b[3].Acked = false
	wantExportViolation(t, checkExport(t, b), "export-missing", "rev 9 delete ns/k1")
}

// A change the exporter reported lost (history gone) is not owed.
func TestCheckersExportExcusesReportedLoss(t *testing.T) {
	b := validExport()
	b[3].Acked = false
	r := CheckExport(exportLog(t), b, ExportCheck{Namespace: ns, From: 4, Until: 9, Lost: []RevRange{{8, 9}}})
	if len(r.Violations) > 0 || r.Excused != 1 {
		t.Fatalf("loss reported by the exporter not excused: %s %v", r.Summary(), r.Violations)
	}
}

// k1's update first sent after its deletion.
func TestCheckersExportReportsOutOfOrder(t *testing.T) {
	b := validExport()
	k1c, k1d := b[2].Records[0], b[3].Records[2]
	b[2].Records[0] = k1d
	b[3].Records = []export.Record{k1c}
	wantExportViolation(t, checkExport(t, b), "export-order", "MODIFIED ns/k1 at revision 7 (key u1/7): first sent after revision 9")
}

// A record whose content is not the change at its revision, sent with
// its right key in the first place (so only the record check sees it).
func TestCheckersExportReportsCorruptedRecord(t *testing.T) {
	b := validExport()
	bad := exportRecord(watch.Modified, "k1", 7, "not-c", "R1", "u1")
	b[2].Records[0], b[3].Records[0] = bad, bad
	wantExportViolation(t, checkExport(t, b), "export-record", "MODIFIED ns/k1 at revision 7")
	// An invented record at a revision without a change.
	b = validExport()
	b[2].Records = append(b[2].Records, exportRecord(watch.Added, "k9", 8, "e", "R0", "u9"))
	wantExportViolation(t, checkExport(t, b), "export-record", "ns/k9 at revision 8 (key u9/8): no change of the namespace")
	// A wrong type.
	b = validExport()
	b[1].Records[1].Type = watch.Modified
	wantExportViolation(t, checkExport(t, b), "export-record", "the change at that revision is ADDED")
}

// The redelivery of k1's update carries other content under its key, a
// key names another uid than its event, and one event changes uid.
func TestCheckersExportReportsUnstableKey(t *testing.T) {
	b := validExport()
	again := exportRecord(watch.Modified, "k1", 7, "c", "R1", "u1")
	again.Event.Source.Component = "restarted"
	b[3].Records[0] = again
	wantExportViolation(t, checkExport(t, b), "export-key", "key u1/7")

	b = validExport()
	b[3].Records[2].Key = "u7/9"
	wantExportViolation(t, checkExport(t, b), "export-key", "not <uid>/<revision> u1/9")

	b = validExport()
	b[3].Records[2] = exportRecord(watch.Deleted, "k1", 9, "c", "R1", "u8")
	wantExportViolation(t, checkExport(t, b), "export-key", "uid u8, but the event created at revision 5 was sent with uid u1")
}
