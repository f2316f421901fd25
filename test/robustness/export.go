package robustness

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/kubevents/kubevents/export"
)

// ExportBatch is one batch of records a sink was sent, in the order the
// sink received it, and whether it acknowledged it (a webhook's 2xx).
type ExportBatch struct {
	Records []export.Record
	Acked   bool
}

// RevRange is the revisions (From, To].
type RevRange struct{ From, To int64 }

// ExportCheck configures CheckExport.
type ExportCheck struct {
	// Namespace is the namespace whose changes the change log knows; the
	// records of other namespaces are not judged.
	Namespace string
	// From is the cursor the exporter started from: the changes after it
	// are owed.
	From int64
	// Until is the last revision the exporter must have delivered by the
	// end (the last acknowledged write); the change log must be complete
	// for Namespace over (From, Until].
	Until int64
	// Lost are the revisions the exporter reported lost to its sink (the
	// history no longer reached back to its cursor): not owed.
	Lost []RevRange
}

// ExportReport is what CheckExport found.
type ExportReport struct {
	// Batches and Acked are the batches with records of the namespace
	// sent and acknowledged; Records the records of the namespace in
	// acknowledged batches, Redelivered how many of those had been
	// acknowledged before (at-least-once duplicates); Owed the changes
	// that had to arrive, Excused those in a lost range.
	Batches, Acked, Records, Redelivered, Owed, Excused int
	// Violations are every broken export guarantee: export-missing (an
	// owed change never acknowledged), export-order (a change delivered
	// after a later change of its key, other than as an exact
	// redelivery), export-record (a record that is not the change at its
	// revision) and export-key (an idempotency key that does not name
	// its record, or that carried different content twice).
	Violations []Violation
}

// Summary is a one-line account of the report.
func (r ExportReport) Summary() string {
	return fmt.Sprintf("export: %d batches (%d acknowledged), %d records delivered (%d redelivered), %d changes owed (%d excused as lost), %d violations",
		r.Batches, r.Acked, r.Records, r.Redelivered, r.Owed, r.Excused, len(r.Violations))
}

// CheckExport judges what a sink was sent against the change log, for a
// sink that takes every change (deletions included): every change of
// cfg.Namespace in (From, Until] that is not in a lost range is in an
// acknowledged batch at least once; per key (namespace/name), changes
// arrive in revision order, a record older than one already sent for
// its key being allowed only as an exact redelivery of a record sent
// before (a batch sent again after a failure or a restart); every
// record is the change at its revision (type, name, message, reason,
// involved object, resourceVersion); each idempotency key is
// "<uid>/<revision>" of its record, carries the same content every time
// it is sent, and one event (from its creation to its deletion) keeps
// one uid.
func CheckExport(l *ChangeLog, batches []ExportBatch, cfg ExportCheck) ExportReport {
	var r ExportReport
	bad := func(check, format string, a ...any) {
		if len(r.Violations) < 50 {
			r.Violations = append(r.Violations, Violation{check, fmt.Sprintf(format, a...)})
		}
	}
	// The type each change must carry, and the revision of the creation
	// that began its event's life (its incarnation).
	typ := map[int64]string{}
	born := map[int64]int64{}
	alive := map[string]int64{}
	for _, c := range l.Changes(cfg.Namespace) {
		start, existed := alive[c.Name]
		switch {
		case c.Deleted:
			typ[c.Rev] = "DELETED"
			delete(alive, c.Name)
		case existed:
			typ[c.Rev] = "MODIFIED"
		default:
			typ[c.Rev] = "ADDED"
			start = c.Rev
			alive[c.Name] = c.Rev
		}
		born[c.Rev] = start
	}

	content := map[string]string{} // idempotency key -> what it carried
	uids := map[int64]string{}     // incarnation -> uid
	sent := map[string]bool{}      // keys sent so far
	acked := map[string]bool{}     // keys acknowledged so far
	latest := map[string]int64{}   // name -> highest revision sent
	delivered := map[int64]bool{}  // revisions acknowledged
	for bi, b := range batches {
		if !slices.ContainsFunc(b.Records, func(rec export.Record) bool {
			return rec.Event == nil || rec.Event.Namespace == cfg.Namespace
		}) {
			continue
		}
		r.Batches++
		if b.Acked {
			r.Acked++
		}
		// A batch may carry one key twice only if the exporter sent one
		// change twice in it, which the order check reports; sent is
		// updated after the batch so that a batch cannot excuse itself.
		var inBatch []string
		for _, rec := range b.Records {
			if rec.Event == nil {
				bad("export-record", "batch %d: record %s without an event", bi, rec.Key)
				continue
			}
			if rec.Event.Namespace != cfg.Namespace {
				continue
			}
			name := rec.Event.Name
			where := fmt.Sprintf("batch %d: %s %s/%s at revision %d (key %s)", bi, rec.Type, cfg.Namespace, name, rec.Revision, rec.Key)

			// The key names its record and always carries the same.
			if want := string(rec.Event.UID) + "/" + strconv.FormatInt(rec.Revision, 10); rec.Key != want {
				bad("export-key", "%s: the key is not <uid>/<revision> %s", where, want)
			}
			body, err := json.Marshal(rec.Event)
			if err != nil {
				bad("export-record", "%s: %v", where, err)
				continue
			}
			fp := fmt.Sprintf("%s %d %s", rec.Type, rec.Revision, body)
			if prev, ok := content[rec.Key]; ok && prev != fp {
				bad("export-key", "%s: key sent before with other content: %s, now %s", where, prev, fp)
			} else if !ok {
				content[rec.Key] = fp
			}

			// Order per key: nothing older than what was sent, unless it
			// is a record sent before.
			if rec.Revision < latest[name] && !sent[rec.Key] {
				bad("export-order", "%s: first sent after revision %d of the same key", where, latest[name])
			}
			latest[name] = max(latest[name], rec.Revision)
			inBatch = append(inBatch, rec.Key)

			// The record is the change at its revision.
			c, known := l.Lookup(rec.Revision)
			switch {
			case known && c.Namespace == cfg.Namespace:
				got := objectOf(rec.Event)
				want := c.Object
				want.Rev = rec.Revision
				if string(rec.Type) != typ[c.Rev] || got != want {
					bad("export-record", "%s: the change at that revision is %s %v (state %+v, got %+v)", where, typ[c.Rev], c, want, got)
				}
				inc := born[c.Rev]
				if u, ok := uids[inc]; ok && u != string(rec.Event.UID) {
					bad("export-key", "%s: uid %s, but the event created at revision %d was sent with uid %s", where, rec.Event.UID, inc, u)
				} else if !ok {
					uids[inc] = string(rec.Event.UID)
				}
			case rec.Revision > cfg.From && rec.Revision <= cfg.Until:
				bad("export-record", "%s: no change of the namespace at that revision", where)
			}

			if b.Acked {
				r.Records++
				if acked[rec.Key] {
					r.Redelivered++
				}
				delivered[rec.Revision] = true
			}
		}
		for _, k := range inBatch {
			sent[k] = true
			if b.Acked {
				acked[k] = true
			}
		}
	}

	for _, c := range l.Changes(cfg.Namespace) {
		if c.Rev <= cfg.From || c.Rev > cfg.Until {
			continue
		}
		if lostIn(cfg.Lost, c.Rev) {
			r.Excused++
			continue
		}
		r.Owed++
		if !delivered[c.Rev] {
			bad("export-missing", "%s %v never acknowledged by the sink", typ[c.Rev], c)
		}
	}
	return r
}

func lostIn(lost []RevRange, rev int64) bool {
	for _, lr := range lost {
		if rev > lr.From && rev <= lr.To {
			return true
		}
	}
	return false
}
