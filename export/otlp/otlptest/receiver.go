// Package otlptest is a loopback OpenTelemetry collector for tests: it
// serves the OTLP logs service (collector/logs/v1) over gRPC and over
// HTTP (POST /v1/logs, protobuf bodies), keeps what it receives with
// attributes decoded into plain maps, and can be told to refuse, fail,
// hang or go down for a while.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	collogpb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// LogsPath is the HTTP path of the OTLP logs service.
const LogsPath = "/v1/logs"

// Mode is how the receiver answers export requests.
type Mode int

// Modes.
const (
	// Accept keeps the records and answers success.
	Accept Mode = iota
	// Unavailable answers gRPC Unavailable / HTTP 503 and keeps nothing:
	// a collector that is overloaded or restarting.
	Unavailable
	// Reject answers gRPC InvalidArgument / HTTP 400 and keeps nothing:
	// a collector refusing the data.
	Reject
	// PartialReject keeps every record but the first and answers success
	// with a partial success rejecting one record.
	PartialReject
	// Warn keeps every record and answers success with a partial
	// success that rejects nothing but carries a message (OTLP's
	// warning).
	Warn
	// Hang keeps nothing and answers only when the request's context ends
	// or the receiver stops: a collector that accepted the connection and
	// never replies.
	Hang
)

// Options configure a Receiver.
type Options struct {
	// TLS, when set, makes both servers serve TLS with it.
	TLS *tls.Config
	// Observe, when set, is called with the idempotency keys
	// (kubevents.idempotency_key) of each accepted request's records as
	// it arrives: benchmarks time deliveries with it.
	Observe func(keys []string)
	// Discard keeps no records (Records stays empty), so that benchmarks
	// sending many do not hold them all.
	Discard bool
	// KeepRequests keeps a copy of each accepted request as received
	// (ExportRequests), for tests comparing encodings exactly.
	KeepRequests bool
}

// Record is a log record as received, with its resource and scope.
type Record struct {
	// Resource holds the resource attributes.
	Resource map[string]any
	// Scope and ScopeVersion are the instrumentation scope's.
	Scope        string
	ScopeVersion string
	// Attributes holds the record attributes. Values are string, int64,
	// bool, float64, []byte, []any or map[string]any.
	Attributes map[string]any
	// Body is the body's string value ("" for a non-string body).
	Body string
	// SeverityNumber and SeverityText are the record's severity.
	SeverityNumber int32
	SeverityText   string
	// Timestamp and ObservedTimestamp are the record's times (zero when
	// unset).
	Timestamp         time.Time
	ObservedTimestamp time.Time
	// Protocol is "grpc" or "http": the server that received it.
	Protocol string
	// Request numbers the request it came in, from 1 in arrival order
	// (records of one request share it).
	Request int
	// Headers holds the request's headers (gRPC metadata), names
	// lower-cased.
	Headers map[string][]string
}

// Receiver is a loopback OTLP logs collector.
type Receiver struct {
	opts Options

	grpcAddr, httpAddr string

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced when requests or records arrive
	mode     Mode
	records  []Record
	raw      []*collogpb.ExportLogsServiceRequest
	requests int
	up       bool
	grpcSrv  *grpc.Server
	httpSrv  *http.Server
	stopHang chan struct{} // closed when the servers go down
	wg       sync.WaitGroup
}

// Start starts a receiver on two loopback ports and stops it when t ends.
func Start(t testing.TB, opts Options) *Receiver {
	t.Helper()
	r, err := Listen(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// Listen starts a receiver on two loopback ports; Stop stops it.
func Listen(opts Options) (*Receiver, error) {
	r := &Receiver{opts: opts, changed: make(chan struct{})}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("otlptest: listen: %w", err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = gl.Close()
		return nil, fmt.Errorf("otlptest: listen: %w", err)
	}
	r.grpcAddr, r.httpAddr = gl.Addr().String(), hl.Addr().String()
	r.serve(gl, hl)
	return r, nil
}

// GRPCEndpoint is the gRPC server's host:port.
func (r *Receiver) GRPCEndpoint() string { return r.grpcAddr }

// HTTPEndpoint is the URL of the HTTP server's logs path.
func (r *Receiver) HTTPEndpoint() string {
	scheme := "http"
	if r.opts.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.httpAddr + LogsPath
}

// Endpoint returns GRPCEndpoint for protocol "grpc" and HTTPEndpoint
// otherwise.
func (r *Receiver) Endpoint(protocol string) string {
	if protocol == "grpc" {
		return r.GRPCEndpoint()
	}
	return r.HTTPEndpoint()
}

// SetMode changes how the receiver answers from the next request on.
func (r *Receiver) SetMode(m Mode) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mode = m
}

// Records returns a copy of the records kept so far, in arrival order
// (duplicates included).
func (r *Receiver) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.records...)
}

// ExportRequests returns copies of the accepted requests kept so far
// (Options.KeepRequests), in arrival order.
func (r *Receiver) ExportRequests() []*collogpb.ExportLogsServiceRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*collogpb.ExportLogsServiceRequest, len(r.raw))
	for i, req := range r.raw {
		out[i] = proto.Clone(req).(*collogpb.ExportLogsServiceRequest)
	}
	return out
}

// Requests returns the number of export requests received, whatever the
// answer.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// WaitRecords waits until at least n records were kept and returns them,
// or returns ctx's error with the records kept so far.
func (r *Receiver) WaitRecords(ctx context.Context, n int) ([]Record, error) {
	for {
		r.mu.Lock()
		recs, ch := append([]Record(nil), r.records...), r.changed
		r.mu.Unlock()
		if len(recs) >= n {
			return recs, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return recs, fmt.Errorf("otlptest: %d of %d records: %w", len(recs), n, ctx.Err())
		}
	}
}

// WaitRequests waits until at least n export requests arrived (whatever
// the answer), or returns ctx's error.
func (r *Receiver) WaitRequests(ctx context.Context, n int) error {
	for {
		r.mu.Lock()
		got, ch := r.requests, r.changed
		r.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("otlptest: %d of %d requests: %w", got, n, ctx.Err())
		}
	}
}

// notifyLocked wakes the waiters; r.mu is held.
func (r *Receiver) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Down stops both servers, closing their connections; the ports stay
// reserved in name only (another process could take them) until Up.
func (r *Receiver) Down() {
	r.mu.Lock()
	if !r.up {
		r.mu.Unlock()
		return
	}
	r.up = false
	g, h, hang := r.grpcSrv, r.httpSrv, r.stopHang
	r.mu.Unlock()
	close(hang) // releases hung requests
	g.Stop()
	// Shutdown, unlike Close, waits for the handlers to return.
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if h.Shutdown(ctx) != nil {
		_ = h.Close()
	}
	r.wg.Wait()
}

// shutdownTimeout bounds how long Down waits for HTTP handlers, which
// return at once once hung requests are released.
const shutdownTimeout = 5 * time.Second

// Up restarts the servers on the ports they had.
func (r *Receiver) Up() error {
	gl, err := net.Listen("tcp", r.grpcAddr)
	if err != nil {
		return fmt.Errorf("otlptest: relisten: %w", err)
	}
	hl, err := net.Listen("tcp", r.httpAddr)
	if err != nil {
		_ = gl.Close()
		return fmt.Errorf("otlptest: relisten: %w", err)
	}
	r.serve(gl, hl)
	return nil
}

// Stop stops the receiver for good (Start registers it as cleanup).
func (r *Receiver) Stop() { r.Down() }

// serve starts the servers on gl and hl.
func (r *Receiver) serve(gl, hl net.Listener) {
	var gopts []grpc.ServerOption
	if r.opts.TLS != nil {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(r.opts.TLS)))
		hl = tls.NewListener(hl, r.opts.TLS)
	}
	gopts = append(gopts, grpc.WaitForHandlers(true)) // Stop waits for handlers
	g := grpc.NewServer(gopts...)
	collogpb.RegisterLogsServiceServer(g, &grpcService{r: r})
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+LogsPath, r.handleHTTP)
	h := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	r.mu.Lock()
	r.grpcSrv, r.httpSrv, r.up, r.stopHang = g, h, true, make(chan struct{})
	r.mu.Unlock()
	r.wg.Add(2)
	go func() { defer r.wg.Done(); _ = g.Serve(gl) }()
	go func() { defer r.wg.Done(); _ = h.Serve(hl) }()
}

// errHang is the answer to a hung request once it ends.
var errHang = errors.New("otlptest: hung request ended")

// export applies the mode to one request and returns the response, or an
// error code and message.
func (r *Receiver) export(ctx context.Context, req *collogpb.ExportLogsServiceRequest, protocol string, headers map[string][]string) (*collogpb.ExportLogsServiceResponse, codes.Code, string) {
	r.mu.Lock()
	r.requests++
	request := r.requests
	mode, hang := r.mode, r.stopHang
	r.notifyLocked()
	r.mu.Unlock()
	switch mode {
	case Unavailable:
		return nil, codes.Unavailable, "otlptest: unavailable"
	case Reject:
		return nil, codes.InvalidArgument, "otlptest: rejected"
	case Hang:
		select {
		case <-ctx.Done():
		case <-hang:
		}
		return nil, codes.Unavailable, errHang.Error()
	}
	resp := &collogpb.ExportLogsServiceResponse{}
	if r.opts.Discard && mode == Accept {
		// Nothing is kept: read only the idempotency keys, as a
		// benchmark's collector on another machine would cost eventsd's
		// machine nothing (webhooktest's KeysOnly does the same).
		if r.opts.Observe != nil {
			r.opts.Observe(idempotencyKeys(req))
		}
		r.mu.Lock()
		r.notifyLocked()
		r.mu.Unlock()
		return resp, codes.OK, ""
	}
	recs := decode(req, protocol, headers)
	for i := range recs {
		recs[i].Request = request
	}
	if mode == PartialReject && len(recs) > 0 {
		recs = recs[1:]
		resp.PartialSuccess = &collogpb.ExportLogsPartialSuccess{RejectedLogRecords: 1, ErrorMessage: "otlptest: first record rejected"}
	}
	if mode == Warn {
		resp.PartialSuccess = &collogpb.ExportLogsPartialSuccess{ErrorMessage: "otlptest: a warning"}
	}
	if r.opts.Observe != nil {
		keys := make([]string, 0, len(recs))
		for _, rec := range recs {
			if k, ok := rec.Attributes["kubevents.idempotency_key"].(string); ok {
				keys = append(keys, k)
			}
		}
		r.opts.Observe(keys)
	}
	r.mu.Lock()
	if !r.opts.Discard {
		r.records = append(r.records, recs...)
	}
	if r.opts.KeepRequests {
		r.raw = append(r.raw, proto.Clone(req).(*collogpb.ExportLogsServiceRequest))
	}
	r.notifyLocked()
	r.mu.Unlock()
	return resp, codes.OK, ""
}

// grpcService is the gRPC logs service.
type grpcService struct {
	collogpb.UnimplementedLogsServiceServer
	r *Receiver
}

// Export implements the logs service.
func (s *grpcService) Export(ctx context.Context, req *collogpb.ExportLogsServiceRequest) (*collogpb.ExportLogsServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	resp, code, msg := s.r.export(ctx, req, "grpc", md)
	if code != codes.OK {
		return nil, status.Error(code, msg)
	}
	return resp, nil
}

// httpStatus maps the gRPC codes export answers with to OTLP/HTTP's.
var httpStatus = map[codes.Code]int{
	codes.Unavailable:     http.StatusServiceUnavailable,
	codes.InvalidArgument: http.StatusBadRequest,
}

// maxBody bounds an HTTP request body, as a collector does.
const maxBody = 32 << 20

// handleHTTP serves POST /v1/logs with a protobuf body.
func (r *Receiver) handleHTTP(w http.ResponseWriter, req *http.Request) {
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		writeStatus(w, http.StatusUnsupportedMediaType, codes.InvalidArgument, "otlptest: only application/x-protobuf, not "+ct)
		return
	}
	var body io.Reader = http.MaxBytesReader(w, req.Body, maxBody)
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(body)
		if err != nil {
			writeStatus(w, http.StatusBadRequest, codes.InvalidArgument, err.Error())
			return
		}
		defer gz.Close()
		body = gz
	}
	b, err := io.ReadAll(body)
	if err != nil {
		writeStatus(w, http.StatusBadRequest, codes.InvalidArgument, err.Error())
		return
	}
	var msg collogpb.ExportLogsServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		writeStatus(w, http.StatusBadRequest, codes.InvalidArgument, err.Error())
		return
	}
	headers := make(map[string][]string, len(req.Header))
	for k, v := range req.Header {
		headers[strings.ToLower(k)] = v
	}
	resp, code, text := r.export(req.Context(), &msg, "http", headers)
	if code != codes.OK {
		writeStatus(w, httpStatus[code], code, text)
		return
	}
	out, err := proto.Marshal(resp)
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, codes.Internal, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = io.Copy(w, bytes.NewReader(out))
}

// writeStatus answers an OTLP/HTTP failure: a google.rpc.Status body.
func writeStatus(w http.ResponseWriter, httpCode int, code codes.Code, msg string) {
	b, _ := proto.Marshal(&spb.Status{Code: int32(code), Message: msg})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(httpCode)
	_, _ = w.Write(b)
}

// decode flattens req into Records.
func decode(req *collogpb.ExportLogsServiceRequest, protocol string, headers map[string][]string) []Record {
	var out []Record
	for _, rl := range req.GetResourceLogs() {
		res := attrs(rl.GetResource().GetAttributes())
		for _, sl := range rl.GetScopeLogs() {
			for _, lr := range sl.GetLogRecords() {
				out = append(out, Record{
					Resource:          res,
					Scope:             sl.GetScope().GetName(),
					ScopeVersion:      sl.GetScope().GetVersion(),
					Attributes:        attrs(lr.GetAttributes()),
					Body:              lr.GetBody().GetStringValue(),
					SeverityNumber:    int32(lr.GetSeverityNumber()),
					SeverityText:      lr.GetSeverityText(),
					Timestamp:         unixNano(lr.GetTimeUnixNano()),
					ObservedTimestamp: unixNano(lr.GetObservedTimeUnixNano()),
					Protocol:          protocol,
					Headers:           headers,
				})
			}
		}
	}
	return out
}

// idempotencyKeys returns the kubevents.idempotency_key attribute of each
// of req's records that has one, without decoding the rest.
func idempotencyKeys(req *collogpb.ExportLogsServiceRequest) []string {
	var keys []string
	for _, rl := range req.GetResourceLogs() {
		for _, sl := range rl.GetScopeLogs() {
			for _, lr := range sl.GetLogRecords() {
				for _, kv := range lr.GetAttributes() {
					if kv.GetKey() == "kubevents.idempotency_key" {
						if v, ok := kv.GetValue().GetValue().(*commonpb.AnyValue_StringValue); ok {
							keys = append(keys, v.StringValue)
						}
						break
					}
				}
			}
		}
	}
	return keys
}

// unixNano converts an OTLP time; 0 is unset.
func unixNano(n uint64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(n))
}

// attrs decodes key-values into a map.
func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

// value decodes one attribute value.
func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	case *commonpb.AnyValue_ArrayValue:
		var a []any
		for _, e := range x.ArrayValue.GetValues() {
			a = append(a, value(e))
		}
		return a
	case *commonpb.AnyValue_KvlistValue:
		return attrs(x.KvlistValue.GetValues())
	}
	return nil
}
