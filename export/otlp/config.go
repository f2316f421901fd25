package otlp

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubevents/kubevents/export/sinktls"
)

// Protocols the sink speaks.
const (
	// ProtocolGRPC is OTLP over gRPC (the collector's port 4317).
	ProtocolGRPC = "grpc"
	// ProtocolHTTP is OTLP over HTTP with protobuf bodies (port 4318).
	ProtocolHTTP = "http"
)

// DefaultTimeout bounds one export request when Config.Timeout is unset:
// the OpenTelemetry exporters' own default, long enough for a collector
// under load, short enough that a hung collector is retried.
const DefaultTimeout = 10 * time.Second

// DefaultHTTPPath is the path an HTTP endpoint without one is given: the
// OTLP/HTTP logs path.
const DefaultHTTPPath = "/v1/logs"

// Config configures an OTLP sink. It is read from the export configuration
// file (YAML, through its JSON form).
type Config struct {
	// Protocol is "grpc" (the default when empty) or "http".
	Protocol string `json:"protocol,omitempty"`
	// Endpoint is where the collector listens. For grpc, host:port
	// ("otel-collector:4317"). For http, the URL of the logs endpoint
	// ("https://otel-collector:4318/v1/logs"); an empty path, or /,
	// becomes /v1/logs. Required.
	Endpoint string `json:"endpoint"`
	// Insecure sends without TLS. For grpc it selects a plaintext
	// connection; for http the URL's scheme decides (http:// is plaintext)
	// and insecure may only be set together with an http:// URL. TLS must be
	// unset when Insecure is true. Default false: TLS, verified against the
	// system's roots unless TLS.CAFile is set.
	Insecure bool `json:"insecure,omitempty"`
	// Headers are sent with every request (gRPC metadata or HTTP headers),
	// for example an authorization token. Names must be valid HTTP header
	// names; for grpc they are sent lower-cased and may hold only letters,
	// digits, '-', '_' and '.' (gRPC metadata keys), not starting with
	// grpc-.
	Headers map[string]string `json:"headers,omitempty"`
	// TLS configures the TLS client when Insecure is false.
	TLS *TLSConfig `json:"tls,omitempty"`
	// Timeout bounds one export request, as a Go duration ("10s").
	// Zero means DefaultTimeout.
	Timeout metav1.Duration `json:"timeout,omitempty"`
}

// TLSConfig configures the TLS client of a sink when Insecure is false:
// the tls block all sinks share.
type TLSConfig = sinktls.Config

// protocol returns the configured protocol, defaulted.
func (c *Config) protocol() string {
	if c.Protocol == "" {
		return ProtocolGRPC
	}
	return c.Protocol
}

// timeout returns the configured timeout, defaulted.
func (c *Config) timeout() time.Duration {
	if c.Timeout.Duration == 0 {
		return DefaultTimeout
	}
	return c.Timeout.Duration
}

// Validate checks c without touching the network or the file system;
// paths in the errors are relative to fldPath (for example
// field.NewPath("sinks").Index(0).Child("otlp")).
func (c *Config) Validate(fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	proto := c.protocol()
	switch proto {
	case ProtocolGRPC, ProtocolHTTP:
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("protocol"), c.Protocol, []string{ProtocolGRPC, ProtocolHTTP}))
	}

	epPath := fldPath.Child("endpoint")
	plaintext := c.Insecure
	switch {
	case c.Endpoint == "":
		errs = append(errs, field.Required(epPath, "the collector's address"))
	case proto == ProtocolGRPC:
		errs = append(errs, validateHostPort(epPath, c.Endpoint)...)
	case proto == ProtocolHTTP:
		u, uerrs := validateURL(epPath, c.Endpoint)
		errs = append(errs, uerrs...)
		if u != nil {
			if c.Insecure && u.Scheme == "https" {
				errs = append(errs, field.Invalid(fldPath.Child("insecure"), c.Insecure, "insecure cannot be set with an https:// endpoint; use an http:// endpoint to send without TLS"))
			}
			plaintext = plaintext || u.Scheme == "http"
		}
	}

	for name, value := range c.Headers {
		hp := fldPath.Child("headers").Key(name)
		switch {
		case !httpguts.ValidHeaderFieldName(name):
			errs = append(errs, field.Invalid(hp, name, "not a valid HTTP header name"))
		case proto == ProtocolGRPC && !validGRPCMetadataKey(name):
			errs = append(errs, field.Invalid(hp, name, "for protocol grpc a header name has only letters, digits, '-', '_' and '.', and does not start with grpc-"))
		}
		if !httpguts.ValidHeaderFieldValue(value) {
			// The value may be a secret: do not echo it.
			errs = append(errs, field.Invalid(hp, "(value omitted)", "not a valid HTTP header value"))
		}
	}

	if c.TLS != nil {
		tp := fldPath.Child("tls")
		if plaintext {
			errs = append(errs, field.Forbidden(tp, "tls cannot be set when sending without TLS (insecure, or an http:// endpoint)"))
		}
		errs = append(errs, c.TLS.Validate(tp)...)
	}

	if c.Timeout.Duration < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("timeout"), c.Timeout.Duration.String(), "must not be negative"))
	}
	return errs
}

// validGRPCMetadataKey reports whether name, lower-cased, is a gRPC
// metadata key an application may send: gRPC refuses other characters
// when sending, and reserves the grpc- prefix.
func validGRPCMetadataKey(name string) bool {
	name = strings.ToLower(name)
	if strings.HasPrefix(name, "grpc-") {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// validateHostPort checks a gRPC endpoint: host:port, no scheme.
func validateHostPort(p *field.Path, ep string) field.ErrorList {
	if strings.Contains(ep, "://") {
		return field.ErrorList{field.Invalid(p, ep, "for protocol grpc the endpoint is host:port, without a scheme")}
	}
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		return field.ErrorList{field.Invalid(p, ep, "must be host:port: "+err.Error())}
	}
	if host == "" {
		return field.ErrorList{field.Invalid(p, ep, "the host is empty")}
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return field.ErrorList{field.Invalid(p, ep, "the port must be a number from 1 to 65535")}
	}
	return nil
}

// validateURL checks an HTTP endpoint and returns it parsed when valid.
func validateURL(p *field.Path, ep string) (*url.URL, field.ErrorList) {
	u, err := url.Parse(ep)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(p, ep, "not a URL: "+err.Error())}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, field.ErrorList{field.Invalid(p, ep, "for protocol http the endpoint is an http:// or https:// URL")}
	}
	if u.Host == "" {
		return nil, field.ErrorList{field.Invalid(p, ep, "the URL has no host")}
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, field.ErrorList{field.Invalid(p, ep, "the URL may not have user information, a query or a fragment")}
	}
	return u, nil
}
