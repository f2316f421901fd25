package fold

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CountedAnnotation, on an event events.k8s.io/v1 creates were folded
// into, remembers how many occurrences the latest of those creates
// contributed, by the name each was sent with: client-go's tools/events
// recorder writes its series to the name it created (a PATCH, then a
// create of that name with the series' whole count when the PATCH gets
// 404), so a later create of a remembered name adds only what is new.
// The value is "name=count,..." (event names are DNS subdomains, without
// '=' or ','), the most recent last, at most MaxCounted entries.
const CountedAnnotation = "fold.eventsd.kubevents.io/counted"

// MaxCounted bounds the names CountedAnnotation remembers: the names of
// the last folded creates, of which a recorder's series is one of the
// latest unless many other clients fold into the same event between its
// writes.
const MaxCounted = 8

// Key returns the isomorphism key of ev created through v: events with
// the same key are one series. Its parts are separated by a byte no
// Kubernetes name, kind, reason or controller contains, so no two
// different events share a key. Whether ev is a series-style event
// (eventTime set, as events.k8s.io/v1 requires) is part of the key: the
// two styles count differently (series.count, or count).
func Key(ev *corev1.Event, v eventapi.Version) string {
	var b strings.Builder
	add := func(parts ...string) {
		for _, p := range parts {
			b.WriteString(p)
			b.WriteByte(0)
		}
	}
	ref := func(r *corev1.ObjectReference) {
		if r == nil {
			add("", "", "", "", "", "")
			return
		}
		add(r.Kind, r.Namespace, r.Name, string(r.UID), r.APIVersion, r.FieldPath)
	}
	style := "count"
	if seriesStyle(ev) {
		style = "series"
	}
	add(strconv.Itoa(int(v)), style, ev.Namespace, ev.Type, ev.Reason, ev.ReportingController, ev.ReportingInstance)
	ref(&ev.InvolvedObject)
	if v == eventapi.EventsV1 {
		// tools/events' key: action and the related object too.
		add(ev.Action)
		ref(ev.Related)
	} else {
		// tools/record's aggregation key: the source.
		add(ev.Source.Component, ev.Source.Host)
	}
	return b.String()
}

// seriesStyle reports whether ev counts its occurrences in series (an
// events.k8s.io-style event: eventTime set, or a series) rather than in
// count and lastTimestamp.
func seriesStyle(ev *corev1.Event) bool {
	return ev.Series != nil || !ev.EventTime.IsZero()
}

// Occurrences returns how many occurrences ev reports
// (eventapi.Occurrences).
func Occurrences(ev *corev1.Event) int32 { return eventapi.Occurrences(ev) }

// LastObserved returns when ev was last observed (eventapi.LastObserved).
func LastObserved(ev *corev1.Event) time.Time { return eventapi.LastObserved(ev) }

// Choose returns the stored event that ev, created through v, folds
// into: among candidates isomorphic to ev and last observed no longer
// than window before now, the earliest created (ties broken by name), so
// that every replica, seeing the same candidates, chooses the same one;
// nil when there is none. Candidates that are ev itself (the same
// namespace and name) are skipped.
func Choose(candidates []*corev1.Event, ev *corev1.Event, v eventapi.Version, now time.Time, window time.Duration) *corev1.Event {
	key := Key(ev, v)
	var best *corev1.Event
	for _, c := range candidates {
		if c.Namespace == ev.Namespace && c.Name == ev.Name {
			continue
		}
		if now.Sub(LastObserved(c)) > window || Key(c, v) != key {
			continue
		}
		if best == nil || Earlier(c, best) {
			best = c
		}
	}
	return best
}

// StoredBefore returns, for created, an event just stored as the first
// of its series, the isomorphic candidate within the window that was
// stored before it, if any: the one with the lowest resourceVersion
// among those whose resourceVersion is below created's (which, just
// created, is its creation's revision). Revisions order writes on every
// replica, so of two creates of a new series racing on two replicas, the
// later stored, looking after its own write, finds the earlier, unless
// something was written to the earlier since.
func StoredBefore(candidates []*corev1.Event, created *corev1.Event, v eventapi.Version, now time.Time, window time.Duration) *corev1.Event {
	key := Key(created, v)
	own, err := strconv.ParseInt(created.ResourceVersion, 10, 64)
	if err != nil {
		return nil
	}
	var best *corev1.Event
	var bestRev int64
	for _, c := range candidates {
		rev, err := strconv.ParseInt(c.ResourceVersion, 10, 64)
		if err != nil || rev >= own || (c.Namespace == created.Namespace && c.Name == created.Name) {
			continue
		}
		if now.Sub(LastObserved(c)) > window || Key(c, v) != key {
			continue
		}
		if best == nil || rev < bestRev {
			best, bestRev = c, rev
		}
	}
	return best
}

// Earlier reports whether a was created before b, ties broken by name:
// the order in which Choose prefers candidates.
func Earlier(a, b *corev1.Event) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// Fold returns stored with ev, created through v, folded in, and the
// number of occurrences it added: the count (series.count, or count for
// core/v1-style events) grows by the occurrences ev reports (for an
// events.k8s.io/v1 create of a name CountedAnnotation remembers, by
// those beyond what that name contributed before), the last observed
// time (series.lastObservedTime, or lastTimestamp) moves to ev's when
// later, and ev's note (message) becomes the event's when ev is not
// older than the stored event. now is the server's time, for an ev that
// carries no time of its own. stored is not modified. An added count of
// 0 (a create repeating what its name already contributed) leaves the
// event unchanged: the result is stored itself.
func Fold(stored, ev *corev1.Event, v eventapi.Version, now time.Time) (*corev1.Event, int32) {
	add := Occurrences(ev)
	var counted []countedName
	if v == eventapi.EventsV1 {
		counted = parseCounted(stored.Annotations[CountedAnnotation])
		if i := slices.IndexFunc(counted, func(c countedName) bool { return c.name == ev.Name }); i >= 0 {
			add -= counted[i].count
			counted = slices.Delete(counted, i, i+1)
		}
		if add <= 0 {
			return stored, 0
		}
		counted = append(counted, countedName{ev.Name, Occurrences(ev)})
		if len(counted) > MaxCounted {
			counted = counted[len(counted)-MaxCounted:]
		}
	}
	out := stored.DeepCopy()
	if counted != nil {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[CountedAnnotation] = formatCounted(counted)
	}
	last := LastObserved(stored)
	at := occurredAt(ev, now)
	if seriesStyle(stored) {
		n := int32(1)
		if out.Series != nil {
			n = out.Series.Count
		}
		lot := metav1.NewMicroTime(last)
		if at.After(last) {
			lot = metav1.NewMicroTime(at)
		}
		out.Series = &corev1.EventSeries{Count: max(n, 1) + add, LastObservedTime: lot}
	} else {
		out.Count = max(out.Count, 1) + add
		if at.After(out.LastTimestamp.Time) {
			out.LastTimestamp = metav1.NewTime(at.Truncate(time.Second))
		}
		if out.FirstTimestamp.IsZero() {
			out.FirstTimestamp = stored.CreationTimestamp
		}
	}
	if !at.Before(last) {
		out.Message = ev.Message
	}
	return out, add
}

// occurredAt is when ev's latest occurrence happened, by its own fields,
// or now when it carries none.
func occurredAt(ev *corev1.Event, now time.Time) time.Time {
	switch {
	case ev.Series != nil && !ev.Series.LastObservedTime.IsZero():
		return ev.Series.LastObservedTime.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	}
	return now
}

// countedName is one entry of CountedAnnotation.
type countedName struct {
	name  string
	count int32
}

// parseCounted reads CountedAnnotation's value; malformed entries (the
// annotation is the server's, but a client may overwrite it) are
// skipped.
func parseCounted(s string) []countedName {
	var out []countedName
	for e := range strings.SplitSeq(s, ",") {
		name, n, ok := strings.Cut(e, "=")
		c, err := strconv.ParseInt(n, 10, 32)
		if !ok || err != nil || name == "" || c < 1 {
			continue
		}
		out = append(out, countedName{name, int32(c)})
	}
	return out
}

func formatCounted(cs []countedName) string {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(c.name)
		b.WriteByte('=')
		b.WriteString(strconv.Itoa(int(c.count)))
	}
	return b.String()
}
