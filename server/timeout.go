package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Defaults of the server's timeouts (Config).
const (
	// DefaultRequestTimeout is kube-apiserver's --request-timeout: a
	// request other than a watch that has not been answered by then gets
	// 504.
	DefaultRequestTimeout = 60 * time.Second
	// DefaultIdleTimeout is how long a keep-alive connection may wait for
	// its next request; kube-apiserver's (and Go's http.DefaultTransport's
	// idle) 90 s.
	DefaultIdleTimeout = 90 * time.Second
	// DefaultReadHeaderTimeout bounds reading a request's headers;
	// kube-apiserver's 32 s.
	DefaultReadHeaderTimeout = 32 * time.Second
	// DefaultBodyReadTimeout bounds reading a request's body, which is
	// read before the request takes an in-flight slot.
	DefaultBodyReadTimeout = 60 * time.Second
	// DefaultWriteTimeout bounds writing one response, or one watch
	// frame, to a client that does not read.
	DefaultWriteTimeout = 60 * time.Second
)

// NewHTTPServer returns the http.Server that serves s, with the
// connection timeouts of s's Config (idle keep-alive, header read) and
// its errors logged to the Config's Logger. cmd/eventsd and tests share
// it.
func (s *Server) NewHTTPServer() *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
}

// readBodyFirst reads a write's body under its own read deadline, before
// the request takes an in-flight slot, so that a client sending its body
// slowly holds a connection but not a slot other writes need. The body is
// put back in memory for the handler. On failure the error has been
// written and ok is false.
func (s *Server) readBodyFirst(w http.ResponseWriter, r *http.Request) (ok bool) {
	rc := http.NewResponseController(w)
	// Connection deadlines are wall-clock times, whatever the Config's
	// clock.
	if err := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.cfg.Logger.Debug("setting the body read deadline", "err", err)
	}
	body, se := readBody(w, r)
	_ = rc.SetReadDeadline(time.Time{})
	if se != nil {
		writeStatus(w, se)
		return false
	}
	rb := &readBody1st{data: body}
	rb.Reset(body)
	r.Body = rb
	return true
}

// withTimeout runs h with the request timeout (or the shorter timeout
// parameter of the request's query q), as kube-apiserver's timeout filter does: h runs in
// a worker goroutine and writes into a buffer; if it has not finished
// when the timeout fires on the Config's clock, its context is cancelled,
// the client gets kube-apiserver's 504 at once and whatever h writes
// later is discarded. h goes on in the background until it returns,
// holding whatever in-flight slot it took, so work that outlives its
// answer still counts against the limits; Drain waits for it at
// shutdown. The buffered answer is written under a write deadline, so a
// client that does not read is cut off and pins one response at most.
//
// The workers are kept (handlerPool): a fresh goroutine per request grew
// its stack on every decode, about 20% more CPU per create.
func (s *Server) withTimeout(w http.ResponseWriter, r *http.Request, q url.Values, h func(http.ResponseWriter, *http.Request)) {
	timeout := s.cfg.RequestTimeout
	if t := q.Get("timeout"); t != "" {
		// kube-apiserver's request deadline: the client's timeout
		// parameter, when shorter than --request-timeout.
		d, err := time.ParseDuration(t)
		if err != nil {
			writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("invalid timeout specified in the request URL - %v", err)))
			return
		}
		if d > 0 && d < timeout {
			timeout = d
		}
	}
	// The handler's context is not the request's: net/http cancels that
	// one when ServeHTTP returns, which is right (the client is gone),
	// but the cause would then be context.Canceled, not the timeout.
	ctx, cancel := context.WithCancelCause(r.Context())
	tw := &timeoutWriter{header: make(http.Header), status: statusOutputOf(w), dst: w, deadline: s.setWriteDeadline}
	done := make(chan *handlerPanic, 1)
	hr := r.WithContext(ctx)
	s.workers.run(func() {
		defer cancel(nil)
		p := recovered(func() { h(tw, hr) })
		if !tw.finish() && p != nil && p.value != http.ErrAbortHandler {
			// The 504 has been answered: nobody else can log it.
			s.cfg.Logger.Error("panic serving request after its timeout", "method", r.Method, "path", r.URL.Path, "panic", p.value, "stack", string(p.stack))
		}
		done <- p
	})
	timer := s.cfg.Clock.NewTimer(timeout)
	defer timer.Stop()
	select {
	case p := <-done:
		s.finishHandled(w, tw, p)
	case <-timer.C():
		timedOut, streamed := tw.timeOut()
		if !timedOut {
			// h finished as the timer fired: its answer stands.
			s.finishHandled(w, tw, <-done)
			return
		}
		cancel(context.DeadlineExceeded)
		if streamed {
			// Part of the answer is out: the status line cannot become
			// a 504. Cut the connection, as kube-apiserver's timeout
			// filter does, so that the client sees an incomplete answer.
			panic(http.ErrAbortHandler)
		}
		s.setWriteDeadline(w)
		writeStatus(w, requestTimedOut())
	}
}

// finishHandled writes the answer h buffered in tw, or re-raises its
// panic in the request's goroutine, where ServeHTTP answers it.
func (s *Server) finishHandled(w http.ResponseWriter, tw *timeoutWriter, p *handlerPanic) {
	if p != nil {
		panic(p)
	}
	s.setWriteDeadline(w)
	tw.copyTo(w)
}

// handlerPanic is a panic in a handler run by withTimeout, with the stack
// of the goroutine it happened in.
type handlerPanic struct {
	value any
	stack []byte
}

func (p *handlerPanic) String() string { return fmt.Sprintf("%v", p.value) }

// recovered runs f and returns its panic, if any.
func recovered(f func()) (p *handlerPanic) {
	defer func() {
		if v := recover(); v != nil {
			p = &handlerPanic{value: v, stack: debug.Stack()}
		}
	}()
	f()
	return nil
}

// requestTimedOut is kube-apiserver's answer to a request that outlived
// --request-timeout.
func requestTimedOut() *apierrors.StatusError {
	return apierrors.NewTimeoutError(fmt.Sprintf("request did not complete within requested timeout - %v", context.DeadlineExceeded), 0)
}

// setWriteDeadline bounds the time the response being written may take.
func (s *Server) setWriteDeadline(w http.ResponseWriter) {
	err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.cfg.Logger.Debug("setting the write deadline", "err", err)
	}
}

// timeoutWriter buffers a handler's answer until it is done or timed out,
// unless the handler streams it (stream).
type timeoutWriter struct {
	mu       sync.Mutex
	header   http.Header
	code     int
	body     bytes.Buffer
	timedOut bool
	done     bool   // the handler has finished
	status   output // the form of Status answers
	// dst is the request's writer, which stream writes through to, each
	// write under a deadline set by deadline.
	dst       http.ResponseWriter
	deadline  func(http.ResponseWriter)
	streaming bool
}

// streamer is implemented by the writer handlers get from withTimeout:
// stream sends the header and what was written so far, and makes later
// writes go out at once instead of being buffered. A handler whose
// answer is too large to hold in memory (a list of every event) streams
// it; if its request then times out, the connection is cut instead of
// answered 504.
type streamer interface {
	stream() error
}

var _ streamer = (*timeoutWriter)(nil)

func (t *timeoutWriter) stream() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timedOut {
		return http.ErrHandlerTimeout
	}
	if t.streaming {
		return nil
	}
	t.streaming = true
	h := t.dst.Header()
	for k, v := range t.header {
		h[k] = v
	}
	if t.code == 0 {
		t.code = http.StatusOK
	}
	t.deadline(t.dst)
	t.dst.WriteHeader(t.code)
	if _, err := t.dst.Write(t.body.Bytes()); err != nil {
		return err
	}
	t.body = bytes.Buffer{}
	return http.NewResponseController(t.dst).Flush()
}

func (t *timeoutWriter) statusOutput() output { return t.status }

// Header implements http.ResponseWriter.
func (t *timeoutWriter) Header() http.Header { return t.header }

// WriteHeader implements http.ResponseWriter.
func (t *timeoutWriter) WriteHeader(code int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.code == 0 && !t.timedOut {
		t.code = code
	}
}

// Write implements http.ResponseWriter; after the timeout it fails.
func (t *timeoutWriter) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timedOut {
		return 0, http.ErrHandlerTimeout
	}
	if t.code == 0 {
		t.code = http.StatusOK
	}
	if t.streaming {
		t.deadline(t.dst)
		n, err := t.dst.Write(b)
		if err == nil {
			err = http.NewResponseController(t.dst).Flush()
		}
		return n, err
	}
	return t.body.Write(b)
}

// timeOut makes the handler's later writes fail, unless the handler has
// finished; it reports whether it did not (timedOut), and whether part
// of its answer was already streamed.
func (t *timeoutWriter) timeOut() (timedOut, streamed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return false, false
	}
	t.timedOut = true
	return true, t.streaming
}

// finish records that the handler has finished, unless it timed out
// first; it reports whether the handler's answer is the one to write.
func (t *timeoutWriter) finish() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
	return !t.timedOut
}

// copyTo writes the buffered answer to w, unless it was streamed.
func (t *timeoutWriter) copyTo(w http.ResponseWriter) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.streaming {
		return
	}
	h := w.Header()
	for k, v := range t.header {
		h[k] = v
	}
	if t.code == 0 {
		t.code = http.StatusOK
	}
	w.WriteHeader(t.code)
	_, _ = w.Write(t.body.Bytes())
}
