package otlp

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	collogpb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubevents/kubevents/export"
)

// Options are a sink's dependencies and settings that are not part of its
// configuration file.
type Options struct {
	// Version is the instrumentation scope version on the exported
	// records (kubevents' build version); empty leaves it unset.
	Version string
}

// Sink sends batches of event changes to an OpenTelemetry collector. It
// implements export.Sink.
type Sink struct {
	exporter sdklog.Exporter
	builder  *recordBuilder
	// target names the collector in errors.
	target string
	// transport is the HTTP transport the sink created (nil for grpc),
	// whose idle connections Close closes.
	transport *http.Transport
}

var _ export.Sink = (*Sink)(nil)

// closeTimeout bounds Close's wait for the exporter to shut down; nothing
// is in flight by then (Send is synchronous), so it only closes
// connections.
const closeTimeout = 5 * time.Second

// maxResponseBytes bounds how much of a collector's successful HTTP
// response is read to learn about partial success: the response is a
// small protobuf message.
const maxResponseBytes = 64 << 10

// New validates cfg, reads its TLS files and returns a sink. It does not
// connect: the first Send does.
func New(cfg Config, opts Options) (*Sink, error) {
	if errs := cfg.Validate(field.NewPath("otlp")); len(errs) > 0 {
		return nil, fmt.Errorf("otlp sink: invalid configuration: %w", errs.ToAggregate())
	}
	var tlsCfg *tls.Config
	if cfg.TLS != nil || !cfg.Insecure {
		var err error
		if tlsCfg, err = cfg.TLS.ClientConfig(); err != nil {
			return nil, fmt.Errorf("otlp sink: %w", err)
		}
	}
	s := &Sink{builder: newRecordBuilder(opts.Version), target: cfg.Endpoint}
	// The exporters fall back to OTEL_EXPORTER_OTLP_* environment
	// variables for every option not given; every option that matters is
	// given, so that the configuration file alone decides.
	// The exporters' own retry is off (see the package documentation).
	noRetry := otlploggrpc.RetryConfig{Enabled: false}
	var err error
	switch cfg.protocol() {
	case ProtocolGRPC:
		o := []otlploggrpc.Option{
			otlploggrpc.WithEndpoint(cfg.Endpoint),
			otlploggrpc.WithHeaders(cfg.Headers),
			otlploggrpc.WithTimeout(cfg.timeout()),
			otlploggrpc.WithRetry(noRetry),
			otlploggrpc.WithDialOption(grpc.WithUnaryInterceptor(recordGRPCOutcome)),
		}
		if cfg.Insecure {
			o = append(o, otlploggrpc.WithInsecure())
		} else {
			o = append(o, otlploggrpc.WithTLSCredentials(credentials.NewTLS(tlsCfg)))
		}
		// New only parses the options: grpc connects lazily.
		s.exporter, err = otlploggrpc.New(context.Background(), o...)
	case ProtocolHTTP:
		u, _ := url.Parse(cfg.Endpoint) // validated above
		if u.Path == "" || u.Path == "/" {
			u.Path = DefaultHTTPPath
		}
		if u.Scheme == "http" {
			tlsCfg = nil
		}
		s.transport = newTransport(tlsCfg)
		client := &http.Client{Transport: outcomeTransport{s.transport}, Timeout: cfg.timeout()}
		s.exporter, err = otlploghttp.New(context.Background(),
			otlploghttp.WithEndpointURL(u.String()),
			otlploghttp.WithHeaders(cfg.Headers),
			otlploghttp.WithTimeout(cfg.timeout()),
			otlploghttp.WithCompression(otlploghttp.NoCompression),
			otlploghttp.WithRetry(otlploghttp.RetryConfig(noRetry)),
			otlploghttp.WithHTTPClient(client),
		)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp sink: creating the %s exporter for %s: %w", cfg.protocol(), cfg.Endpoint, err)
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
	out := &outcome{}
	err := s.exporter.Export(context.WithValue(ctx, outcomeKey{}, out), s.builder.build(batch))
	return s.classify(out, len(batch), err)
}

// classify turns the exporter's error and what the collector answered
// into Send's result.
func (s *Sink) classify(out *outcome, n int, err error) error {
	if out.answered && out.accepted {
		if out.rejected > 0 {
			return fmt.Errorf("otlp sink %s: %w: the collector rejected %d of %d log records: %s", s.target, export.ErrRejected, out.rejected, n, out.message)
		}
		// Accepted, possibly with a warning (a partial success rejecting
		// nothing), which the exporter reports as an error.
		return nil
	}
	if err == nil {
		if !out.answered {
			return fmt.Errorf("otlp sink %s: the exporter sent nothing for %d records", s.target, n)
		}
		return nil
	}
	if out.answered && out.refused {
		return fmt.Errorf("otlp sink %s: %w: %w", s.target, export.ErrRejected, err)
	}
	return fmt.Errorf("otlp sink %s: %w", s.target, err)
}

// Close shuts the exporter down and closes its connections.
func (s *Sink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	err := s.exporter.Shutdown(ctx)
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
	if err != nil {
		return fmt.Errorf("otlp sink %s: close: %w", s.target, err)
	}
	return nil
}

// outcome is what the collector answered to one export request, recorded
// by a gRPC interceptor or an HTTP round tripper that finds it in the
// request's context. The exporters report only some of it in their
// errors (partial success, for one, only as text).
type outcome struct {
	// answered: the collector sent a response (status or reply).
	answered bool
	// accepted: the response was a success (gRPC OK, HTTP 2xx).
	accepted bool
	// refused: the response refused this request itself (see the
	// package documentation).
	refused bool
	// rejected and message are a partial success's.
	rejected int64
	message  string
}

// outcomeKey is the context key of the *outcome of a Send.
type outcomeKey struct{}

// recordGRPCOutcome is a unary client interceptor recording the
// collector's answer into the call context's outcome.
func recordGRPCOutcome(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	out, ok := ctx.Value(outcomeKey{}).(*outcome)
	if !ok {
		return err
	}
	if err == nil {
		out.answered, out.accepted = true, true
		if resp, ok := reply.(*collogpb.ExportLogsServiceResponse); ok && resp.GetPartialSuccess() != nil {
			out.rejected = resp.GetPartialSuccess().GetRejectedLogRecords()
			out.message = resp.GetPartialSuccess().GetErrorMessage()
		}
		return nil
	}
	st, isStatus := status.FromError(err)
	if !isStatus {
		return err
	}
	// A context error surfaces as a status too, but the collector did
	// not answer it.
	if ctx.Err() == nil {
		out.answered = true
		out.refused = grpcRefused(st)
	}
	return err
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

// outcomeTransport records the collector's HTTP answer into the
// request context's outcome.
type outcomeTransport struct {
	next http.RoundTripper
}

// RoundTrip sends req and records the response's status and, for a
// success, its partial success, giving the exporter an unread copy of
// the body.
func (t outcomeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	out, ok := req.Context().Value(outcomeKey{}).(*outcome)
	if err != nil || !ok {
		return resp, err
	}
	out.answered = true
	switch sc := resp.StatusCode; {
	case sc >= 200 && sc <= 299:
		out.accepted = true
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if rerr != nil {
			// The collector said 2xx: the records are acknowledged
			// whether or not the rest of its answer arrives.
			return resp, nil
		}
		var msg collogpb.ExportLogsServiceResponse
		if proto.Unmarshal(body, &msg) == nil && msg.GetPartialSuccess() != nil {
			out.rejected = msg.GetPartialSuccess().GetRejectedLogRecords()
			out.message = msg.GetPartialSuccess().GetErrorMessage()
		}
	case sc == http.StatusBadRequest, sc == http.StatusRequestEntityTooLarge:
		out.refused = true
	}
	return resp, nil
}
