// Package webhooktest is a webhook receiver on loopback for tests and
// benchmarks of the webhook export sink: it records what it is sent, and
// can be told to answer with an error status for a while, to hold
// requests unanswered, or to go down (connections refused) and come back
// on the same address.
package webhooktest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubevents/kubevents/export"
)

// Request is one POST the receiver got.
type Request struct {
	// Header is the request's header.
	Header http.Header
	// Body is the request's body.
	Body []byte
	// Status is the status code the receiver answered.
	Status int
	// Records are the body's records when it is a JSON array of them
	// (the records format), else nil.
	Records []export.Record
	// Text is the body's text when it is a Slack message, else "".
	Text string
	// RemoteAddr is the sender's address: two requests with the same
	// came over one (kept-alive) connection.
	RemoteAddr string
	// ClientCertCN is the common name of the TLS client certificate the
	// sender presented, if any.
	ClientCertCN string
}

// Options configure a Receiver.
type Options struct {
	// TLS, if set, makes the receiver serve https with it (see
	// GenerateTLS for a configuration signed by a test CA).
	TLS *tls.Config
	// KeysOnly keeps of each request only its header and its records'
	// keys, types and revisions (Record.Event nil, Body and Text empty),
	// so that benchmarks sending many events do not hold them all.
	KeysOnly bool
	// Observe, when set, is called with the keys of each request's
	// records as it is answered 2xx: benchmarks time deliveries with it.
	Observe func(keys []string)
}

// Receiver is a webhook receiver listening on 127.0.0.1. Its methods are
// safe for concurrent use.
type Receiver struct {
	tls      *tls.Config
	keysOnly bool
	observe  func(keys []string)
	addr     string

	mu         sync.Mutex
	srv        *http.Server
	served     chan struct{} // closed when srv's Serve returns
	down       chan struct{} // closed when srv goes down
	requests   []Request
	failCode   int
	okLeft     int // requests to answer 200 before failing
	failLeft   int // requests still to fail; <0: until Heal
	held       int // requests held by Stall
	conns      int // open connections
	retryAfter string
	stalled    bool
	release    chan struct{} // closed to answer stalled requests
	changed    chan struct{} // closed and replaced on every request
	closed     bool
}

// Start starts a receiver on a free loopback port.
func Start(opts Options) (*Receiver, error) {
	r := &Receiver{tls: opts.TLS, keysOnly: opts.KeysOnly, observe: opts.Observe, addr: "127.0.0.1:0", release: make(chan struct{}), changed: make(chan struct{})}
	if err := r.Up(); err != nil {
		return nil, err
	}
	return r, nil
}

// New starts a receiver and closes it when tb's test ends.
func New(tb testing.TB, opts Options) *Receiver {
	tb.Helper()
	r, err := Start(opts)
	if err != nil {
		tb.Fatalf("webhooktest: %v", err)
	}
	tb.Cleanup(r.Close)
	return r
}

// URL is the receiver's URL, http or https, on 127.0.0.1.
func (r *Receiver) URL() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	scheme := "http"
	if r.tls != nil {
		scheme = "https"
	}
	return scheme + "://" + r.addr + "/hook"
}

// Up listens again on the receiver's address after Down (and is what
// Start does first). Connections are accepted again.
func (r *Receiver) Up() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("webhooktest: receiver closed")
	}
	if r.srv != nil {
		return nil
	}
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		return fmt.Errorf("webhooktest: listen on %s: %w", r.addr, err)
	}
	r.addr = ln.Addr().String()
	if r.tls != nil {
		ln = tls.NewListener(ln, r.tls)
	}
	down := make(chan struct{})
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { r.serve(w, req, down) }),
		ReadHeaderTimeout: 10 * time.Second,
		ConnState:         r.connState,
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	r.srv, r.served, r.down = srv, served, down
	return nil
}

// Down stops listening and closes open connections, answering no held
// request: senders see connections refused until Up.
func (r *Receiver) Down() {
	r.mu.Lock()
	srv, served := r.srv, r.served
	if srv == nil {
		r.mu.Unlock()
		return
	}
	r.srv = nil
	close(r.down)
	r.mu.Unlock()
	// Shutdown waits for the handlers, which the closed down channel
	// makes abort their connections without answering.
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	_ = srv.Shutdown(ctx)
	_ = srv.Close()
	<-served
}

// shutdownTimeout bounds Down's wait for handlers, which do not block
// once down.
const shutdownTimeout = 5 * time.Second

// Close stops the receiver for good and waits for its goroutines.
func (r *Receiver) Close() {
	r.Down()
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

// FailNext answers the next n requests (every request until Heal if n is
// negative) with status code, and with a Retry-After header if
// retryAfter is not empty.
func (r *Receiver) FailNext(n, code int, retryAfter string) {
	r.FailAfter(0, n, code, retryAfter)
}

// FailAfter answers the next ok requests with 200, then fails as FailNext.
func (r *Receiver) FailAfter(ok, n, code int, retryAfter string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.okLeft, r.failLeft, r.failCode, r.retryAfter = ok, n, code, retryAfter
}

// Heal answers requests with 200 again, and answers held requests.
func (r *Receiver) Heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.okLeft, r.failLeft = 0, 0
	r.stalled = false
	r.releaseLocked()
}

// Stall holds requests unanswered until the sender gives up, or Heal
// (which answers them), or Down or Close (which close their connections).
func (r *Receiver) Stall() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stalled = true
}

func (r *Receiver) releaseLocked() {
	close(r.release)
	r.release = make(chan struct{})
}

// Requests returns the requests received so far, in order.
func (r *Receiver) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests...)
}

// Records returns the records of the requests answered with 2xx, in the
// order received, duplicates included.
func (r *Receiver) Records() []export.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.recordsLocked()
}

func (r *Receiver) recordsLocked() []export.Record {
	var recs []export.Record
	for _, q := range r.requests {
		if q.Status/100 == 2 {
			recs = append(recs, q.Records...)
		}
	}
	return recs
}

func (r *Receiver) connState(_ net.Conn, state http.ConnState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch state {
	case http.StateNew:
		r.conns++
	case http.StateClosed, http.StateHijacked:
		r.conns--
	default:
		return
	}
	r.notifyLocked()
}

// WaitConns waits until exactly n connections are open to the receiver,
// or returns ctx's error: a sender that closed its idle connections has
// none left.
func (r *Receiver) WaitConns(ctx context.Context, n int) error {
	for {
		r.mu.Lock()
		conns, changed := r.conns, r.changed
		r.mu.Unlock()
		if conns == n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("webhooktest: %d connections open, want %d: %w", conns, n, ctx.Err())
		}
	}
}

// WaitHeld waits until at least n requests are held by Stall, or returns
// ctx's error.
func (r *Receiver) WaitHeld(ctx context.Context, n int) error {
	for {
		r.mu.Lock()
		held, changed := r.held, r.changed
		r.mu.Unlock()
		if held >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("webhooktest: %d of %d requests held: %w", held, n, ctx.Err())
		}
	}
}

// WaitRecords waits until at least n records were accepted (see Records)
// and returns them, or returns ctx's error.
func (r *Receiver) WaitRecords(ctx context.Context, n int) ([]export.Record, error) {
	for {
		r.mu.Lock()
		recs, changed := r.recordsLocked(), r.changed
		r.mu.Unlock()
		if len(recs) >= n {
			return recs, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return recs, fmt.Errorf("webhooktest: %d of %d records: %w", len(recs), n, ctx.Err())
		}
	}
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request, down <-chan struct{}) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return // the sender went away
	}
	q := Request{Header: req.Header.Clone(), Body: body, Status: http.StatusOK, RemoteAddr: req.RemoteAddr}
	if req.TLS != nil && len(req.TLS.PeerCertificates) > 0 {
		q.ClientCertCN = req.TLS.PeerCertificates[0].Subject.CommonName
	}
	if r.keysOnly {
		q.Records = keysOf(body)
		q.Body = nil
	} else {
		var recs []export.Record
		if json.Unmarshal(body, &recs) == nil {
			q.Records = recs
		}
		var msg struct {
			Text *string `json:"text"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Text != nil {
			q.Text = *msg.Text
		}
	}

	r.mu.Lock()
	stalled, release := r.stalled, r.release
	if stalled {
		r.held++
		r.notifyLocked()
	}
	r.mu.Unlock()
	if stalled {
		defer func() {
			r.mu.Lock()
			r.held--
			r.mu.Unlock()
		}()
		select {
		case <-release:
		case <-req.Context().Done():
			r.record(q, 0)
			return
		case <-down:
		}
	}
	select {
	case <-down:
		// Going down: close the connection without an answer.
		r.record(q, 0)
		panic(http.ErrAbortHandler)
	default:
	}

	r.mu.Lock()
	retryAfter := ""
	if r.okLeft > 0 {
		r.okLeft--
	} else if r.failLeft != 0 {
		q.Status, retryAfter = r.failCode, r.retryAfter
		if r.failLeft > 0 {
			r.failLeft--
		}
	}
	r.mu.Unlock()
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(q.Status)
	if q.Status/100 == 2 {
		_, _ = io.WriteString(w, "ok")
		if r.observe != nil {
			keys := make([]string, len(q.Records))
			for i, rec := range q.Records {
				keys[i] = rec.Key
			}
			r.observe(keys)
		}
	} else {
		_, _ = io.WriteString(w, "webhooktest: failing as told with "+strconv.Itoa(q.Status))
	}
	r.record(q, q.Status)
}

// record keeps q, answered with status (0: not answered).
func (r *Receiver) record(q Request, status int) {
	q.Status = status
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, q)
	r.notifyLocked()
}

func (r *Receiver) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// keysOf decodes the records of a records-format body without their
// events, or returns nil.
func keysOf(body []byte) []export.Record {
	var keys []struct {
		Key      string          `json:"idempotencyKey"`
		Type     watch.EventType `json:"type"`
		Revision string          `json:"resourceVersion"`
	}
	if json.Unmarshal(body, &keys) != nil {
		return nil
	}
	recs := make([]export.Record, len(keys))
	for i, k := range keys {
		rev, err := strconv.ParseInt(k.Revision, 10, 64)
		if err != nil {
			return nil
		}
		recs[i] = export.Record{Key: k.Key, Type: k.Type, Revision: rev}
	}
	return recs
}
