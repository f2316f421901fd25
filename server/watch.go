package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
)

// watchParams are a watch request's parameters.
type watchParams struct {
	opts    storage.WatchOptions
	timeout time.Duration
}

func (s *Server) parseWatch(w http.ResponseWriter, rr resourceRequest) (watchParams, *apierrors.StatusError) {
	q := rr.query
	var p watchParams
	sel, se := s.parseSelector(w, q, rr)
	if se != nil {
		return p, se
	}
	p.opts.Selector = sel
	if rr.name != "" {
		p.opts.Fields = append(p.opts.Fields, eventapi.Requirement{Field: eventapi.FieldName, Value: rr.name})
	}
	rv, se := parseRevision(q.Get("resourceVersion"))
	if se != nil {
		return p, se
	}
	bookmarks, _ := queryBool(q, "allowWatchBookmarks")
	match := q.Get("resourceVersionMatch")
	var errs field.ErrorList
	var sendInitial *bool
	if b, ok := queryBool(q, "sendInitialEvents"); ok {
		sendInitial = &b
		if match != string(metav1.ResourceVersionMatchNotOlderThan) {
			errs = append(errs, field.Forbidden(field.NewPath("resourceVersionMatch"), "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
		}
		if b && !bookmarks {
			errs = append(errs, field.Forbidden(field.NewPath("allowWatchBookmarks"), "allowWatchBookmarks must be set to true when sendInitialEvents is true"))
		}
	} else if match != "" {
		errs = append(errs, field.Forbidden(field.NewPath("resourceVersionMatch"), "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
	}
	if len(errs) > 0 {
		return p, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	switch {
	case sendInitial != nil && *sendInitial:
		// The initial state must not be older than the revision asked
		// for. The store decides (ErrFutureRevision, answered with
		// kube-apiserver's 504 Too large resource version): an etcd
		// replica serves it from etcd's current revision, which may be
		// ahead of the Revision it has observed so far.
		p.opts.SendInitialEvents, p.opts.InitialEventsEndBookmark = true, true
		p.opts.Revision = rv
	case sendInitial == nil && rv == 0:
		// No resourceVersion (or "0"): the current state as ADDED events
		// first, as kube-apiserver does without a watch cache.
		p.opts.SendInitialEvents = true
	default:
		// A revision the store has not reached yet is waited for, as an
		// etcd watch does (kube-apiserver has no watch cache for events):
		// the changes after it come when they are written. Changes after
		// the largest revision never come; asking for those after the one
		// before it is the same and keeps the store's rv+1 in range.
		p.opts.Revision = min(rv, math.MaxInt64-1)
	}
	if bookmarks {
		p.opts.ProgressInterval = s.cfg.BookmarkInterval
	}
	if t := q.Get("timeoutSeconds"); t != "" {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 0 {
			return p, apierrors.NewBadRequest(fmt.Sprintf("invalid timeoutSeconds %q", t))
		}
		p.timeout = time.Duration(n) * time.Second
	}
	if p.timeout == 0 {
		p.timeout = s.cfg.MinWatchTimeout + rand.N(s.cfg.MinWatchTimeout)
	}
	return p, nil
}

func (s *Server) watch(w http.ResponseWriter, r *http.Request, rr resourceRequest) {
	o, se := negotiateOutput(r)
	if se != nil {
		writeStatus(w, se)
		return
	}
	if o.kind == outYAML {
		o = output{kind: outJSON} // there is no YAML stream framing
	}
	contentType := "application/json"
	if o.isProtobuf() {
		contentType = protobufMediaType + ";stream=watch"
	}
	p, se := s.parseWatch(w, rr)
	if se != nil {
		writeStatus(w, se)
		return
	}
	// A watch's filter is bounded per event, not summed: its cost follows
	// the rate of changes. A filter past its limit ends the watch with an
	// ERROR event.
	if run := filterRun(p.opts.Selector); run != nil {
		run.Unbudgeted()
	}
	ctx, stopFilter := bindFilter(r.Context(), p.opts.Selector)
	defer stopFilter()
	filterFailed := filterDone(p.opts.Selector)
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeStatus(w, apierrors.NewInternalError(errors.New("the connection does not support streaming")))
		return
	}
	// A family's watch learns of objects joining it (subscribed before
	// the store's watch starts, so that no join is missed).
	feed := newFamilyFeed(s.scopeOf(r.Context()), p.opts.Selector)
	var joins <-chan struct{}
	if feed != nil {
		defer feed.stop()
		joins = feed.signal
	}
	var initial *watchInit
	if p.opts.SendInitialEvents {
		if initial, ok = s.beginInit(w, ctx, &p.opts, rr); !ok {
			return
		}
		defer initial.end()
	}
	watcher, err := s.store(ctx).Watch(ctx, p.opts)
	if errors.Is(err, storage.ErrFutureRevision) {
		writeStatus(w, tooLargeResourceVersion(p.opts.Revision, s.store(ctx).Revision()))
		return
	}
	if err != nil && !errors.Is(err, storage.ErrCompacted) {
		writeStatus(w, statusError(err, rr, ""))
		return
	}
	s.metrics.watchers.Inc()
	defer s.metrics.watchers.Dec()
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-cache, private")
	// Every write to the stream has its own deadline: a client that stops
	// reading is cut off instead of holding the watch open.
	s.setWriteDeadline(w)
	w.WriteHeader(http.StatusOK)
	flusher.Flush()

	enc := &watchEncoder{s: s, rr: rr, o: o}
	if err != nil {
		// kube-apiserver answers a too-old resourceVersion with an ERROR
		// event on an accepted stream.
		s.setWriteDeadline(w)
		_, _ = w.Write(enc.errorFrame(err))
		flusher.Flush()
		return
	}
	defer watcher.Stop()
	timeout := s.cfg.Clock.NewTimer(p.timeout)
	defer timeout.Stop()
	// filterCut ends the watch with its filter's failure, if that is why
	// it ends (its context, cancelled by the failure, also closes the
	// store's watcher).
	filterCut := func() {
		if se := filterFailure(p.opts.Selector); se != nil {
			s.setWriteDeadline(w)
			_, _ = w.Write(enc.errorFrame(se))
			flusher.Flush()
		}
	}
	if initial != nil && !s.sendInitial(ctx, w, flusher, watcher, enc, initial, timeout.C()) {
		filterCut()
		return
	}
	// joinFailed ends the watch with an ERROR event when listing the
	// events of an object joining the family failed.
	joinFailed := func(err error) {
		if se := filterFailure(p.opts.Selector); se != nil {
			err = se // the filter's cut cancelled the join's list
		}
		s.setWriteDeadline(w)
		_, _ = w.Write(enc.errorFrame(err))
	}
	for {
		select {
		case e, ok := <-watcher.ResultChan():
			if !ok {
				filterCut()
				return
			}
			if feed != nil {
				joined, err := feed.admit(ctx, e)
				if err != nil {
					joinFailed(err)
					return
				}
				if !s.writeEvents(w, enc, joined) {
					return
				}
				if feed.sent(e) {
					flusher.Flush()
					continue
				}
			}
			frame, err := enc.frame(e)
			if err != nil {
				s.cfg.Logger.Error("encoding watch event", "err", err)
				return
			}
			s.setWriteDeadline(w)
			if _, err := w.Write(frame); err != nil {
				return
			}
			flusher.Flush()
			if e.Err != nil {
				return
			}
		case <-joins:
			events, err := feed.joined(ctx)
			if err != nil {
				joinFailed(err)
				return
			}
			if !s.writeEvents(w, enc, events) {
				return
			}
			flusher.Flush()
		case <-filterFailed:
			filterCut()
			return
		case <-timeout.C():
			return
		case <-s.stopWatches:
			return
		case <-ctx.Done():
			return
		}
	}
}

// writeEvents writes events as watch frames, without flushing; false
// when the watch must end.
func (s *Server) writeEvents(w http.ResponseWriter, enc *watchEncoder, events []storage.Event) bool {
	for _, e := range events {
		frame, err := enc.frame(e)
		if err != nil {
			s.cfg.Logger.Error("encoding watch event", "err", err)
			return false
		}
		s.setWriteDeadline(w)
		if _, err := w.Write(frame); err != nil {
			return false
		}
	}
	return true
}

// watchEncoder turns storage events into watch frames: one
// {"type","object"} JSON document per line.
type watchEncoder struct {
	s       *Server
	rr      resourceRequest
	o       output
	headers bool // table column definitions already sent
}

func (e *watchEncoder) frame(ev storage.Event) ([]byte, error) {
	if ev.Err != nil {
		return e.errorFrame(ev.Err), nil
	}
	var obj any
	switch {
	case ev.Type == watch.Bookmark:
		bm := &corev1.Event{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.FormatInt(ev.Revision, 10)}}
		if ev.InitialEventsEnd {
			bm.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
		}
		if e.o.kind == outJSON || e.o.kind == outProtobuf {
			obj = externalEvent(e.rr.version, bm)
		} else {
			obj = partialMeta(bm, e.o.metaVersion)
		}
	case e.o.kind == outTable:
		t, err := table(e.rr.version, []*corev1.Event{ev.Object}, metav1.ListMeta{ResourceVersion: ev.Object.ResourceVersion},
			e.o, tableOptions{includeObject: e.o.include, noHeaders: e.headers}, e.s.cfg.Clock.Now())
		if err != nil {
			return nil, err
		}
		e.headers = true
		obj = t
	case e.o.kind == outPartial:
		obj = partialMeta(ev.Object, e.o.metaVersion)
	default:
		obj = externalEvent(e.rr.version, ev.Object)
	}
	if e.o.isProtobuf() {
		return protobufFrame(string(ev.Type), obj)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return encodeFrame(string(ev.Type), raw), nil
}

// protobufFrame is one protobuf watch frame: a 4-byte big-endian length,
// then a metav1.WatchEvent whose object is in the protobuf envelope.
func protobufFrame(typ string, obj any) ([]byte, error) {
	env, err := protobufEnvelope(obj)
	if err != nil {
		return nil, err
	}
	we := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: env}}
	b, err := we.Marshal()
	if err != nil {
		return nil, err
	}
	frame := make([]byte, 4, 4+len(b))
	binary.BigEndian.PutUint32(frame, uint32(len(b)))
	return append(frame, b...), nil
}

func (e *watchEncoder) errorFrame(err error) []byte {
	se := statusError(err, e.rr, "")
	if errors.Is(err, storage.ErrCompacted) {
		se = apierrors.NewResourceExpired("The resourceVersion for the provided watch is too old.")
	}
	st := se.ErrStatus
	st.Kind, st.APIVersion = "Status", "v1"
	if e.o.isProtobuf() {
		if f, err := protobufFrame(string(watch.Error), &st); err == nil {
			return f
		}
	}
	raw, _ := json.Marshal(&st)
	return encodeFrame(string(watch.Error), raw)
}

func encodeFrame(typ string, raw []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(raw) + 32)
	b.WriteString(`{"type":"`)
	b.WriteString(typ)
	b.WriteString(`","object":`)
	b.Write(raw)
	b.WriteString("}\n")
	return b.Bytes()
}
