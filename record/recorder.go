package record

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"

	"github.com/kubevents/kubevents/internal/recordermetrics"
)

// recorder builds events and hands them to its broadcaster.
type recorder struct {
	b      *Broadcaster
	scheme *runtime.Scheme
	source corev1.EventSource
	logger klog.Logger
}

// Event records an event about object with message as given (no
// formatting). The event is queued for every sink and watcher; Event never
// blocks.
func (r *recorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.generate(object, nil, eventtype, reason, message)
}

// Eventf is Event with the message fmt.Sprintf(messageFmt, args...), always
// formatted, as in client-go.
func (r *recorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	r.generate(object, nil, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// AnnotatedEventf is Eventf with annotations on the event object.
func (r *recorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...interface{}) {
	r.generate(object, annotations, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// WithLogger returns a recorder that logs emission problems (no reference,
// invalid type, full queue, shut down) with logger.
func (r *recorder) WithLogger(logger klog.Logger) EventRecorderLogger {
	c := *r
	c.logger = logger
	return &c
}

func (r *recorder) generate(object runtime.Object, annotations map[string]string, eventtype, reason, message string) {
	b := r.b
	b.metrics.Emitted.Inc()
	ref, err := reference.GetReference(r.scheme, object)
	if err != nil {
		b.drops.Count(recordermetrics.DropInvalid, 1)
		r.logger.Error(err, "Could not construct reference, will not report event",
			"object", object, "eventType", eventtype, "reason", reason, "message", message)
		return
	}
	if eventtype != corev1.EventTypeNormal && eventtype != corev1.EventTypeWarning {
		b.drops.Count(recordermetrics.DropInvalid, 1)
		r.logger.Error(nil, "Unsupported event type", "eventType", eventtype)
		return
	}
	t := metav1.Time{Time: b.clock.Now()}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:        eventName(ref.Name, b.nameTime(t.Time)),
			Namespace:   ns,
			Annotations: annotations,
		},
		InvolvedObject:      *ref,
		Reason:              reason,
		Message:             message,
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		Type:                eventtype,
		Source:              r.source,
		ReportingController: r.source.Component,
		ReportingInstance:   r.source.Host,
	}
	b.emit(r.logger, ev)
}

// nameTime returns the UnixNano an event emitted at t is named after: t's,
// or one more than the last name's when that is not later. Events emitted
// in the same nanosecond (or the same tick of a coarse clock) about objects
// of the same name would otherwise get the same name, and all but the first
// would be refused with AlreadyExists (client-go's issue #134993). The
// event's timestamps keep t.
func (b *Broadcaster) nameTime(t time.Time) int64 {
	n := t.UnixNano()
	for {
		last := b.lastName.Load()
		m := max(n, last+1)
		if b.lastName.CompareAndSwap(last, m) {
			return m
		}
	}
}

// eventName is the one naming function for every event the package creates,
// aggregated ones included (they take the name of the occurrence that
// triggered them): "<refName>.<unixNano in lowercase hex>", or a random UUID
// when that is not a valid DNS-1123 subdomain. client-go 1.33+ does this for
// plain events but not for aggregated ones.
func eventName(refName string, unixNano int64) string {
	var arr [80]byte // most names fit: no allocation but the string
	buf := append(arr[:0], refName...)
	buf = append(buf, '.')
	buf = strconv.AppendInt(buf, unixNano, 16)
	if !isDNS1123Subdomain(buf) {
		return string(uuid.NewUUID())
	}
	return string(buf)
}

// isDNS1123Subdomain reports whether s is at most 253 characters of
// dot-separated labels of lowercase alphanumerics and '-', each starting and
// ending with an alphanumeric. It is validation.IsDNS1123Subdomain without
// the regular expression and the error strings.
func isDNS1123Subdomain(s []byte) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	labelStart := true
	var prev byte
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-':
			if labelStart {
				return false
			}
		case c == '.':
			if labelStart || prev == '-' {
				return false
			}
			labelStart = true
			prev = c
			continue
		default:
			return false
		}
		labelStart = false
		prev = c
	}
	return !labelStart && prev != '-'
}
