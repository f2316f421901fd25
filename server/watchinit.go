package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/kubevents/kubevents/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// A watch's initial events are sent in chunks of at most this many frames
// or bytes: the work done, and the memory held, per permit of the
// readGate.
const (
	initChunkFrames = 64
	initChunkBytes  = 256 << 10
)

// watchInit is the state of a watch sending its initial events. Like a
// list, it holds a readOnly in-flight slot until they are sent (as
// kube-apiserver's priority and fairness counts a watch's initialization
// as a request in flight), and it must send them within the request
// timeout; it works on them only while it holds a permit of the server's
// readGate.
type watchInit struct {
	s        *Server
	ticket   uint64
	deadline clock.Timer
	// wantEnd: the client asked for the initial-events-end bookmark
	// (sendInitialEvents); the store is always asked for it, which is
	// how the end of the initial events is known.
	wantEnd      bool
	slot, permit bool
}

// beginInit takes a readOnly slot for a watch that sends initial events
// (429 when there is none, as for a list) and its first permit (429 if
// none comes within the request timeout: the watch has not started, so
// nothing is held while it waits but the slot). opts is made to ask the
// store for the end bookmark. On failure the answer has been written.
func (s *Server) beginInit(w http.ResponseWriter, ctx context.Context, opts *storage.WatchOptions, rr resourceRequest) (*watchInit, bool) {
	if !s.readOnly.tryAcquire() {
		s.metrics.rejected.WithLabelValues("readOnly").Inc()
		s.rejectLog.Warn("request refused: too many requests in flight", "class", "readOnly", "verb", rr.verb)
		tooManyRequests(w)
		return nil, false
	}
	in := &watchInit{s: s, ticket: s.readGate.ticket(), deadline: s.cfg.Clock.NewTimer(s.cfg.RequestTimeout),
		wantEnd: opts.InitialEventsEndBookmark, slot: true}
	s.metrics.initializing.Inc()
	opts.InitialEventsEndBookmark = true
	if err := in.acquire(ctx); err != nil {
		in.end()
		if errors.Is(err, errGateTimeout) {
			s.countInitTimeout(rr)
			tooManyRequests(w)
		}
		return nil, false
	}
	return in, true
}

func (in *watchInit) acquire(ctx context.Context) error {
	if err := in.s.readGate.acquire(in.ticket, ctx.Done(), in.deadline.C()); err != nil {
		return err
	}
	in.permit = true
	return nil
}

func (in *watchInit) releasePermit() {
	if in.permit {
		in.permit = false
		in.s.readGate.release()
	}
}

// end releases what the watch still holds; it may be called again.
func (in *watchInit) end() {
	in.releasePermit()
	if in.slot {
		in.slot = false
		in.deadline.Stop()
		in.s.metrics.initializing.Dec()
		in.s.readOnly.release()
	}
}

func (s *Server) countInitTimeout(rr resourceRequest) {
	s.metrics.initTimeouts.Inc()
	s.rejectLog.Warn("watch ended: its initial events could not be sent within the request timeout",
		"verb", rr.verb, "namespace", rr.namespace, "timeout", s.cfg.RequestTimeout)
}

// sendInitial sends the watch's initial events, up to the store's end
// bookmark (passed on only if the client asked for it), in chunks: each
// is decoded and encoded into memory while the watch holds a permit, then
// written without one. It reports whether the watch goes on; a watch
// whose initial events are not all sent within the request timeout gets
// an ERROR event (504 Timeout) and ends.
func (s *Server) sendInitial(ctx context.Context, w http.ResponseWriter, flusher http.Flusher, watcher storage.Watcher, enc *watchEncoder,
	in *watchInit, watchTimeout <-chan time.Time) bool {
	var buf bytes.Buffer
	write := func() bool {
		if buf.Len() == 0 {
			return true
		}
		s.setWriteDeadline(w)
		_, err := w.Write(buf.Bytes())
		flusher.Flush()
		buf.Reset()
		return err == nil
	}
	timedOut := func() bool {
		in.releasePermit()
		s.countInitTimeout(enc.rr)
		buf.Write(enc.errorFrame(apierrors.NewTimeoutError(
			fmt.Sprintf("the watch's initial events were not sent within %v", s.cfg.RequestTimeout), 1)))
		write()
		return false
	}
	for {
		done := false
		for frames := 0; !done && frames < initChunkFrames && buf.Len() < initChunkBytes; frames++ {
			select {
			case e, ok := <-watcher.ResultChan():
				if !ok {
					in.releasePermit()
					write()
					return false
				}
				if e.Type == watch.Bookmark && e.InitialEventsEnd {
					done = true
					if !in.wantEnd {
						continue
					}
				}
				frame, err := enc.frame(e)
				if err != nil {
					s.cfg.Logger.Error("encoding watch event", "err", err)
					return false
				}
				buf.Write(frame)
				if e.Err != nil {
					in.releasePermit()
					write()
					return false
				}
			case <-in.deadline.C():
				return timedOut()
			case <-watchTimeout:
				return false
			case <-s.stopWatches:
				return false
			case <-ctx.Done():
				return false
			}
		}
		in.releasePermit()
		if !write() {
			return false
		}
		if done {
			in.end()
			return true
		}
		if err := in.acquire(ctx); err != nil {
			if errors.Is(err, errGateTimeout) {
				return timedOut()
			}
			return false
		}
	}
}
