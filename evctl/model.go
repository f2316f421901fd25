package evctl

import (
	"sort"
	"strconv"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/internal/seriesstate"
)

// row is an event as evctl shows it: when it first and last happened, how
// often, and (for series this project's recorder wrote) whether it is over.
type row struct {
	ev          *eventsv1.Event
	first, last time.Time
	count       int32
	state       string
	role        string // timeline: "regarding" or "related"
}

// newRow reads an event of either style: new-style (eventTime, series) or
// legacy (deprecated first/last timestamps and count).
func newRow(ev *eventsv1.Event) *row {
	r := &row{ev: ev, count: 1}
	switch {
	case !ev.EventTime.IsZero():
		r.first = ev.EventTime.Time
	case !ev.DeprecatedFirstTimestamp.IsZero():
		r.first = ev.DeprecatedFirstTimestamp.Time
	default:
		r.first = ev.CreationTimestamp.Time
	}
	r.last = r.first
	if !ev.DeprecatedLastTimestamp.IsZero() {
		r.last = ev.DeprecatedLastTimestamp.Time
	}
	if ev.DeprecatedCount > 1 {
		r.count = ev.DeprecatedCount
	}
	if s := ev.Series; s != nil {
		r.count, r.last = s.Count, s.LastObservedTime.Time
		r.state = ev.Annotations[seriesstate.Annotation]
	}
	return r
}

// sortByLast orders rows as kubectl events does: by last occurrence.
func sortByLast(rows []*row) {
	sort.SliceStable(rows, func(i, j int) bool {
		if !rows[i].last.Equal(rows[j].last) {
			return rows[i].last.Before(rows[j].last)
		}
		return key(rows[i].ev) < key(rows[j].ev)
	})
}

// sortByFirst orders rows in event-time order: by first occurrence.
func sortByFirst(rows []*row) {
	sort.SliceStable(rows, func(i, j int) bool {
		if !rows[i].first.Equal(rows[j].first) {
			return rows[i].first.Before(rows[j].first)
		}
		if !rows[i].last.Equal(rows[j].last) {
			return rows[i].last.Before(rows[j].last)
		}
		return key(rows[i].ev) < key(rows[j].ev)
	})
}

// key orders events of equal times: by cluster (across a fleet's),
// namespace and name.
func key(ev *eventsv1.Event) string {
	return ev.Annotations[eventapi.ClusterAnnotation] + "/" + ev.Namespace + "/" + ev.Name
}

// revision is a resourceVersion as a number when it is one (eventsd's and
// etcd's are), for ordering changes to one object.
func revision(rv string) (int64, bool) {
	n, err := strconv.ParseInt(rv, 10, 64)
	return n, err == nil
}

// objectRef renders a reference as kubectl events does: Kind/name.
func objectRef(kind, name string) string {
	if name == "" {
		return kind
	}
	return kind + "/" + name
}

func trimmed(s string) string { return strings.TrimSpace(s) }
