package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// Record is one exported change of an event.
type Record struct {
	// Key is the idempotency key: the event's UID and the change's
	// resourceVersion, "<uid>/<resourceVersion>". A record sent twice
	// (at-least-once delivery) carries the same key both times.
	Key string
	// Type is watch.Added, watch.Modified or watch.Deleted.
	Type watch.EventType
	// Revision is the change's revision: the resourceVersion of Event.
	Revision int64
	// Cluster is the fleet's cluster the event is of, "" for the root
	// cluster (an eventsd without a fleet has only that one).
	Cluster string
	// Event is the event's state after the change (for Deleted, its last
	// state), with apiVersion v1 and kind Event set, and its namespace
	// the cluster's own (not the storage namespace). Read-only: it is
	// shared with the store and other sinks.
	Event *corev1.Event
}

// KeyOf returns the idempotency key of a change of ev at revision rev.
func KeyOf(ev *corev1.Event, rev int64) string {
	return string(ev.UID) + "/" + strconv.FormatInt(rev, 10)
}

// jsonRecord is Record's JSON form.
type jsonRecord struct {
	Key      string          `json:"idempotencyKey"`
	Type     watch.EventType `json:"type"`
	Revision string          `json:"resourceVersion"`
	Cluster  string          `json:"cluster,omitempty"`
	Event    *corev1.Event   `json:"event"`
}

// jsonForm returns r as MarshalJSON writes it.
func (r Record) jsonForm() jsonRecord {
	return jsonRecord{Key: r.Key, Type: r.Type, Revision: strconv.FormatInt(r.Revision, 10), Cluster: r.Cluster, Event: r.Event}
}

// MarshalJSON writes the record as the webhook and file sinks send it:
//
//	{"idempotencyKey":"<uid>/<rv>","type":"MODIFIED","resourceVersion":"<rv>","cluster":"east","event":{...}}
//
// where event is the core/v1 Event, with apiVersion and kind, and cluster
// the fleet's cluster it is of, left out for the root cluster's events
// (so records of an eventsd without a fleet are as they always were).
func (r Record) MarshalJSON() ([]byte, error) {
	return json.Marshal(r.jsonForm())
}

// WriteJSON appends to buf what MarshalJSON returns, without the copy
// of each record json.Marshal makes: the webhook and file sinks encode
// their batches with it.
func (r Record) WriteJSON(buf *bytes.Buffer) error {
	// An Encoder escapes as Marshal does; it writes nothing on error.
	if err := json.NewEncoder(buf).Encode(r.jsonForm()); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode ends the value with a newline
	return nil
}

// UnmarshalJSON reads what MarshalJSON writes (for receivers and tests).
func (r *Record) UnmarshalJSON(b []byte) error {
	var j jsonRecord
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	rev, err := strconv.ParseInt(j.Revision, 10, 64)
	if err != nil {
		return errors.New("export record: resourceVersion is not an integer")
	}
	*r = Record{Key: j.Key, Type: j.Type, Revision: rev, Cluster: j.Cluster, Event: j.Event}
	return nil
}

// Sink delivers batches of records to one destination.
type Sink interface {
	// Send delivers batch, whose records are in revision order. A nil
	// error acknowledges every record of the batch; any error
	// acknowledges none, and the exporter sends the batch again after a
	// backoff (so a receiver may see a batch twice, with the same keys).
	// An error wrapping ErrRejected says the destination refused the
	// batch itself (say, HTTP 400), not that it was unreachable: after a
	// few attempts such a batch is dropped, counted and logged. Send must
	// return promptly once ctx ends. The exporter never calls Send
	// concurrently on one sink.
	Send(ctx context.Context, batch []Record) error
	// Close flushes and releases the sink.
	Close() error
}

// RetryAfter returns how long the destination asked to wait before the
// next attempt (say, an HTTP answer's Retry-After), or 0: the value of the
// first error in err's chain with a RetryAfter() time.Duration method.
// Sinks give their errors that method; the exporter waits at least that
// long (up to its MaxBackoff) before sending again.
func RetryAfter(err error) time.Duration {
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		return ra.RetryAfter()
	}
	return 0
}

// ErrRejected marks a Send error as the destination refusing the batch,
// which sending it again is unlikely to change.
var ErrRejected = errors.New("rejected by the sink's destination")
