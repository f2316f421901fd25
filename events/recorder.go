package events

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/klog/v2"

	"github.com/kubevents/kubevents/internal/recordermetrics"
)

// recorder emits events on behalf of one reporting controller.
type recorder struct {
	b          *Broadcaster
	refs       *references
	controller string
	instance   string
	logger     klog.Logger
	last       *lastHit // shared by WithLogger copies
}

// lastHit remembers the series of the recorder's last event, guarded by
// the broadcaster's mutex: a repeated event (the common case in a storm)
// is then counted without a map lookup.
type lastHit struct {
	key eventKey
	s   *series
}

// NewRecorder returns a recorder for reportingController. Its reporting
// instance is reportingController + "-" + the host name, shortened to the
// server's 128-character limit when longer (keeping it unique with a hash).
// With resuming on and a sink that can list, the recorder's earlier series
// are listed and resumed before its first write.
func (b *Broadcaster) NewRecorder(scheme *runtime.Scheme, reportingController string) EventRecorderLogger {
	r := &recorder{b: b, refs: &references{scheme: scheme}, controller: reportingController,
		instance: reportingInstance(reportingController, b.hostname), logger: b.o.logger, last: &lastHit{}}
	b.startResume(r.controller, r.instance)
	return r
}

// reportingInstance is controller-host within the server's limit.
func reportingInstance(controller, host string) string {
	inst := controller + "-" + host
	if len(inst) <= ReportingInstanceLimit {
		return inst
	}
	sum := sha256.Sum256([]byte(inst))
	suffix := "-" + hex.EncodeToString(sum[:4])
	return inst[:ReportingInstanceLimit-len(suffix)] + suffix
}

// truncateNote keeps note within the server's limit, ending a shortened
// note with a visible marker and never splitting a UTF-8 sequence.
func truncateNote(note string) string {
	if len(note) <= NoteLimit {
		return note
	}
	cut := NoteLimit - len(truncationMarker)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + truncationMarker
}

// WithLogger implements EventRecorderLogger.
func (r *recorder) WithLogger(logger klog.Logger) EventRecorderLogger {
	c := *r
	c.logger = logger
	return &c
}

// Eventf implements EventRecorder.
func (r *recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	r.emit(regarding, related, nil, eventtype, reason, action, note, args)
}

// AnnotatedEventf implements AnnotatedEventRecorder.
func (r *recorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...interface{}) {
	r.emit(regarding, related, annotations, eventtype, reason, action, note, args)
}

func (r *recorder) emit(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args []interface{}) {
	b := r.b
	b.metrics.Emitted.Inc()
	if eventtype != corev1.EventTypeNormal && eventtype != corev1.EventTypeWarning {
		b.drop(recordermetrics.DropInvalid, "Event dropped: unsupported event type", "type", eventtype, "reason", reason)
		return
	}
	k := eventKey{eventType: eventtype, action: action, reason: reason, controller: r.controller, instance: r.instance}
	var err error
	if k.regarding, err = r.refs.key(regarding); err != nil {
		b.drop(recordermetrics.DropInvalid, "Event dropped: no reference for the regarding object", "err", err, "reason", reason)
		return
	}
	if related != nil {
		if k.related, err = r.refs.key(related); err != nil {
			// As client-go: the event is still recorded, without related.
			r.logger.V(9).Info("no reference for the related object", "err", err)
			related = nil
		}
	}
	now := b.o.clock.Now()
	// A repeated occurrence is only counted: no formatting, no allocation
	// (unless someone watches every occurrence).
	observed := b.observe(r.last, k, now)
	if observed && !b.hasWatchers() {
		return
	}
	ev, err := r.makeEvent(regarding, related, annotations, eventtype, reason, action, note, args, now)
	if err != nil {
		b.drop(recordermetrics.DropInvalid, "Event dropped: no reference for the regarding object", "err", err, "reason", reason)
		return
	}
	b.notifyWatchers(ev)
	if !observed {
		b.add(r.last, k, ev, now)
	}
}

// makeEvent builds the event a first occurrence creates.
func (r *recorder) makeEvent(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args []interface{}, now time.Time) (*eventsv1.Event, error) {
	ref, err := r.refs.reference(regarding)
	if err != nil {
		return nil, err
	}
	var relRef *corev1.ObjectReference
	if related != nil {
		if relRef, err = r.refs.reference(related); err != nil {
			relRef = nil
		}
	}
	if len(args) > 0 {
		// Copying keeps the caller's argument slice from escaping, so
		// that a repeated occurrence (which never formats) allocates none.
		note = fmt.Sprintf(note, append([]interface{}(nil), args...)...)
	}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	var ann map[string]string
	if len(annotations) > 0 {
		ann = make(map[string]string, len(annotations))
		for k, v := range annotations {
			ann[k] = v
		}
	}
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:        util.GenerateEventName(ref.Name, r.b.uniqueNano(now)),
			Namespace:   ns,
			Annotations: ann,
		},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             relRef,
		Note:                truncateNote(note),
		Type:                eventtype,
	}, nil
}
