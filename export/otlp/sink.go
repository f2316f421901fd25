package otlp

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	collogpb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/export"
)

// Options are a sink's dependencies and settings that are not part of its
// configuration file.
type Options struct {
	// Version is the instrumentation scope version on the exported
	// records (kubevents' build version); empty leaves it unset. It is
	// also in the User-Agent.
	Version string
	// Clock reads the records' observed timestamps. Default the real
	// clock.
	Clock clock.PassiveClock
}

// Sink sends batches of event changes to an OpenTelemetry collector. It
// implements export.Sink.
type Sink struct {
	encoder *encoder
	// send delivers one request: sendGRPC or sendHTTP.
	send func(ctx context.Context, req *collogpb.ExportLogsServiceRequest) (*outcome, error)
	// target names the collector in errors.
	target  string
	timeout time.Duration

	// gRPC: the connection, its client and the metadata of every call.
	conn *grpc.ClientConn
	// redial is conn's, seen through the two calls sendGRPC makes of it
	// (a test gives a fake).
	redial   redialer
	client   collogpb.LogsServiceClient
	metadata metadata.MD

	// HTTP: the URL, the request headers, the client, and the transport
	// the sink created, whose idle connections Close closes.
	url       string
	header    http.Header
	http      *http.Client
	transport *http.Transport
}

var _ export.Sink = (*Sink)(nil)

// maxResponseBytes bounds how much of a collector's HTTP response is read:
// a success is a small protobuf message, a failure a google.rpc.Status.
const maxResponseBytes = 64 << 10

// errorBodyBytes is how much of a failed HTTP answer's body an error
// quotes when it is not a google.rpc.Status.
const errorBodyBytes = 512

// userAgent is the User-Agent of a sink of kubevents version v.
func userAgent(v string) string {
	if v == "" {
		return "kubevents-export"
	}
	return "kubevents-export/" + v
}

// New validates cfg, reads its TLS files and returns a sink. It does not
// connect: the first Send does.
//
// The sink encodes each batch itself into OTLP's generated types and
// sends it with the protocol's own gRPC client (collector/logs/v1), or
// POSTs it as protobuf for http, as the OpenTelemetry SDK's OTLP log
// exporters do; nothing is read from OTEL_* environment variables, so
// that the configuration file alone decides.
func New(cfg Config, opts Options) (*Sink, error) {
	if errs := cfg.Validate(field.NewPath("otlp")); len(errs) > 0 {
		return nil, fmt.Errorf("otlp sink: invalid configuration: %w", errs.ToAggregate())
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	var tlsCfg *tls.Config
	if cfg.TLS != nil || !cfg.Insecure {
		var err error
		if tlsCfg, err = cfg.TLS.ClientConfig(); err != nil {
			return nil, fmt.Errorf("otlp sink: %w", err)
		}
	}
	s := &Sink{encoder: newEncoder(opts.Version, opts.Clock.Now), target: cfg.Endpoint, timeout: cfg.timeout()}
	switch cfg.protocol() {
	case ProtocolGRPC:
		creds := insecure.NewCredentials()
		if !cfg.Insecure {
			creds = credentials.NewTLS(tlsCfg)
		}
		// NewClient only parses the options: grpc connects lazily.
		conn, err := grpc.NewClient(cfg.Endpoint, grpc.WithTransportCredentials(creds), grpc.WithUserAgent(userAgent(opts.Version)),
			grpc.WithConnectParams(reconnect))
		if err != nil {
			return nil, fmt.Errorf("otlp sink: creating the grpc client for %s: %w", cfg.Endpoint, err)
		}
		s.conn, s.redial, s.client = conn, conn, collogpb.NewLogsServiceClient(conn)
		if len(cfg.Headers) > 0 {
			s.metadata = metadata.New(cfg.Headers) // lower-cases the names
		}
		s.send = s.sendGRPC
	case ProtocolHTTP:
		u, _ := url.Parse(cfg.Endpoint) // validated above
		if u.Path == "" || u.Path == "/" {
			u.Path = DefaultHTTPPath
		}
		if u.Scheme == "http" {
			tlsCfg = nil
		}
		s.url = u.String()
		s.transport = newTransport(tlsCfg)
		s.http = &http.Client{Transport: s.transport, Timeout: s.timeout}
		s.header = make(http.Header, len(cfg.Headers)+2)
		s.header.Set("User-Agent", userAgent(opts.Version))
		for k, v := range cfg.Headers {
			s.header.Set(k, v)
		}
		s.header.Set("Content-Type", "application/x-protobuf")
		s.send = s.sendHTTP
	}
	return s, nil
}

// HTTP transport settings: those of net/http's DefaultTransport.
const (
	dialTimeout           = 30 * time.Second
	dialKeepAlive         = 30 * time.Second
	idleConnTimeout       = 90 * time.Second
	tlsHandshakeTimeout   = 10 * time.Second
	expectContinueTimeout = time.Second
	maxIdleConns          = 100
)

// newTransport returns the sink's own HTTP transport, which honours the
// proxy environment variables as every Go and Kubernetes client does.
func newTransport(tlsCfg *tls.Config) *http.Transport {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: dialKeepAlive}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          maxIdleConns,
		IdleConnTimeout:       idleConnTimeout,
		TLSHandshakeTimeout:   tlsHandshakeTimeout,
		ExpectContinueTimeout: expectContinueTimeout,
		TLSClientConfig:       tlsCfg,
	}
}

// Send exports batch in one request and returns once the collector has
// answered; see the package documentation for how answers map to errors.
func (s *Sink) Send(ctx context.Context, batch []export.Record) error {
	if len(batch) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("otlp sink %s: %w", s.target, err)
	}
	out, err := s.send(ctx, s.encoder.encode(batch))
	return s.classify(out, len(batch), err)
}

// classify turns the error of a send and what the collector answered
// into Send's result.
func (s *Sink) classify(out *outcome, n int, err error) error {
	if err == nil {
		if out.rejected > 0 {
			return fmt.Errorf("otlp sink %s: %w: the collector rejected %d of %d log records: %s", s.target, export.ErrRejected, out.rejected, n, out.message)
		}
		// Accepted, possibly with a warning (a partial success rejecting
		// nothing).
		return nil
	}
	if out.refused {
		return fmt.Errorf("otlp sink %s: %w: %w", s.target, export.ErrRejected, err)
	}
	return fmt.Errorf("otlp sink %s: %w", s.target, err)
}

// Close closes the sink's connections.
func (s *Sink) Close() error {
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
	if s.conn != nil {
		if err := s.conn.Close(); err != nil {
			return fmt.Errorf("otlp sink %s: close: %w", s.target, err)
		}
	}
	return nil
}

// outcome is what the collector answered to one export request.
type outcome struct {
	// refused: the answer refused this request itself (see the package
	// documentation).
	refused bool
	// rejected and message are a partial success's.
	rejected int64
	message  string
}

// partial records resp's partial success, if any, into out.
func (out *outcome) partial(resp *collogpb.ExportLogsServiceResponse) {
	if ps := resp.GetPartialSuccess(); ps != nil {
		out.rejected = ps.GetRejectedLogRecords()
		out.message = ps.GetErrorMessage()
	}
}

// sendGRPC exports req with the logs service's gRPC client, within the
// timeout, with the configured headers as metadata. An error is the
// call's; outcome says whether the collector refused the request.
func (s *Sink) sendGRPC(ctx context.Context, req *collogpb.ExportLogsServiceRequest) (*outcome, error) {
	out := &outcome{}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	// Each attempt of the exporter is a dial: a connection waiting out
	// gRPC's own backoff would fail it at once, long after the collector
	// is back. The redial is asynchronous: the call waits (within its
	// timeout) for the connection to leave TRANSIENT_FAILURE, so that it
	// is not failed by the picker of the last failure.
	if s.redial.GetState() == connectivity.TransientFailure {
		s.redial.ResetConnectBackoff()
		s.redial.WaitForStateChange(cctx, connectivity.TransientFailure)
	}
	if s.metadata != nil {
		cctx = metadata.NewOutgoingContext(cctx, s.metadata)
	}
	resp, err := s.client.Export(cctx, req)
	if err == nil {
		out.partial(resp)
		return out, nil
	}
	// A context error surfaces as a status too, but the collector did
	// not answer it.
	if st, ok := status.FromError(err); ok && cctx.Err() == nil {
		out.refused = grpcRefused(st)
	}
	return out, err
}

// grpcRefused reports whether st refuses the request itself: OTLP's
// non-retryable InvalidArgument, and ResourceExhausted without RetryInfo
// (the request exceeds the collector's size limit, which sending it again
// cannot change).
func grpcRefused(st *status.Status) bool {
	switch st.Code() {
	case codes.InvalidArgument:
		return true
	case codes.ResourceExhausted:
		for _, d := range st.Details() {
			if _, ok := d.(*errdetails.RetryInfo); ok {
				return false
			}
		}
		return true
	}
	return false
}

// sendHTTP POSTs req, protobuf-encoded, to the logs URL: a 2xx answer
// accepts it (its body may carry a partial success), 400 and 413 refuse
// it, any other answer or a transport failure is an error to retry.
func (s *Sink) sendHTTP(ctx context.Context, req *collogpb.ExportLogsServiceRequest) (*outcome, error) {
	out := &outcome{}
	body, err := proto.Marshal(req)
	if err != nil {
		out.refused = true // the same batch cannot be encoded later either
		return out, fmt.Errorf("encoding the request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return out, err
	}
	maps.Copy(hreq.Header, s.header)
	resp, err := s.http.Do(hreq)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	answer, rerr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	switch sc := resp.StatusCode; {
	case sc >= 200 && sc <= 299:
		// The collector said 2xx: the records are acknowledged whether
		// or not the rest of its answer arrives.
		var msg collogpb.ExportLogsServiceResponse
		if rerr == nil && proto.Unmarshal(answer, &msg) == nil {
			out.partial(&msg)
		}
		return out, nil
	case sc == http.StatusBadRequest, sc == http.StatusRequestEntityTooLarge:
		out.refused = true
	}
	return out, fmt.Errorf("the collector answered %s: %s", resp.Status, errorText(answer))
}

// errorText is the readable part of a failed OTLP/HTTP answer's body: a
// google.rpc.Status's message, or the start of a text body.
func errorText(body []byte) string {
	var st spb.Status
	if proto.Unmarshal(body, &st) == nil && st.GetMessage() != "" {
		return st.GetMessage()
	}
	if len(body) == 0 {
		return "(empty)"
	}
	if len(body) > errorBodyBytes {
		body = body[:errorBodyBytes]
	}
	return strings.ToValidUTF8(strings.TrimSpace(string(body)), "?")
}

// redialer is what sendGRPC needs of its connection to redial it.
type redialer interface {
	GetState() connectivity.State
	ResetConnectBackoff()
	WaitForStateChange(ctx context.Context, from connectivity.State) bool
}

// reconnect is the gRPC connection's own redial schedule between the
// exporter's attempts (each of which redials at once, sendGRPC): capped at
// the exporter's longest backoff rather than gRPC's 120 s, so that a
// collector back after a long outage is found by the time the exporter
// tries again.
var reconnect = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: export.DefaultMaxBackoff},
	MinConnectTimeout: 20 * time.Second,
}
