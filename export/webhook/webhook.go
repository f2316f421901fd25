// Package webhook is the export sink that POSTs batches of records to an
// HTTP(S) URL, as a JSON array of records or as Slack-compatible incoming
// webhook messages.
//
// # Formats
//
// "records" (the default) POSTs each batch as one JSON array of records
// (export.Record's JSON form) with Content-Type application/json and an
// Idempotency-Key header naming the batch: the first record's key, or
// "<first key>..<last key>" for a batch of several. A batch sent again
// after a failure carries the same header, but the exporter may cut
// batches differently after a restart, so receivers that deduplicate
// should do so by each record's idempotencyKey.
//
// "slack" POSTs {"text": "..."} with one line per record, for Slack's
// incoming webhooks and the chat servers that accept their payload
// (Mattermost, Rocket.Chat, ...):
//
//	Warning BackOff Pod default/web-1: Back-off restarting failed container (count 600) [<uid>/<rv>]
//
// A batch whose text would exceed MaxTextBytes (Slack truncates messages
// beyond 40,000 characters) is split into several POSTs sent in order; a
// failure of one of them fails the batch, which the exporter sends again
// whole, so the parts before the failure are posted twice. Chat messages
// carry no idempotency key a server could use.
//
// # Answers
//
// A 2xx answer acknowledges the batch. 408, 429, 5xx and transport
// failures are retryable errors (a Retry-After header is kept in the
// error: see RetryAfter). Redirects are not followed (a POST redirected
// with 301 or 302 would become a GET): they and every other answer are
// errors wrapping export.ErrRejected, with the status and the start of the
// answer's body. Error messages name the URL's scheme and host only: a
// Slack webhook URL's path is a secret.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/transport"
	"k8s.io/utils/clock"

	"github.com/kubevents/kubevents/export"
	"github.com/kubevents/kubevents/export/sinktls"
)

// Formats of Config.Format.
const (
	// FormatRecords POSTs a batch as a JSON array of records.
	FormatRecords = "records"
	// FormatSlack POSTs a batch as Slack-compatible {"text": ...} messages.
	FormatSlack = "slack"
)

// Defaults and limits.
const (
	// DefaultTimeout bounds one POST, from connecting to reading the
	// answer, when Config.Timeout is unset.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxTextBytes is the default size cap of one Slack message's
	// text: Slack truncates text beyond 40,000 characters, and a
	// character is at least a byte, so this leaves a margin.
	DefaultMaxTextBytes = 39000
	// MinMaxTextBytes is the smallest MaxTextBytes accepted: room for one
	// line with its key and a shortened message.
	MinMaxTextBytes = 256
	// errorBodyBytes is how much of a refusing answer's body an error
	// quotes: enough for a receiver's reason, bounded for logs.
	errorBodyBytes = 512
	// drainBytes is how much of an answer's body is read and discarded so
	// that the connection can be reused; a longer body closes it instead.
	drainBytes = 64 << 10
	// idleConnTimeout closes a kept-alive connection idle this long, less
	// than the usual load balancer idle timeouts would cut it silently.
	idleConnTimeout = 50 * time.Second
	// maxIdleConns: batches are sent one at a time, so one connection is
	// in use; a second covers the overlap with a connection being closed.
	maxIdleConns = 2
	// defaultUserAgent identifies the sender to the receiver.
	defaultUserAgent = "kubevents-export"
)

// Config configures a webhook sink. It is part of the export
// configuration file, so its fields have JSON (and YAML) names.
type Config struct {
	// URL receives the POSTs; http or https. Required.
	URL string `json:"url"`
	// Headers are added to every POST. They may not set the headers the
	// sink sets itself (Content-Type, Content-Length, Host,
	// Transfer-Encoding, Connection, Idempotency-Key), nor Authorization
	// when a bearer token is configured.
	Headers map[string]string `json:"headers,omitempty"`
	// BearerToken is sent as "Authorization: Bearer <token>".
	BearerToken string `json:"bearerToken,omitempty"`
	// BearerTokenFile holds the bearer token (surrounding white space is
	// ignored). It is read by New, which fails if it cannot be read, and
	// read again at most once a minute afterwards, so a rotated token
	// (a projected service account token, say) is picked up; if a later
	// read fails the last token read is kept. Not with BearerToken.
	BearerTokenFile string `json:"bearerTokenFile,omitempty"`
	// TLS configures https connections.
	TLS TLSConfig `json:"tls,omitempty"`
	// Timeout bounds one POST, as a Go duration ("10s", "1m"). Default
	// DefaultTimeout (10s).
	Timeout metav1.Duration `json:"timeout,omitempty"`
	// Format is FormatRecords ("records", the default) or FormatSlack
	// ("slack").
	Format string `json:"format,omitempty"`
	// MaxTextBytes caps the text of one message in the slack format (a
	// longer batch is split; a longer line is shortened). Default
	// DefaultMaxTextBytes; at least MinMaxTextBytes. Only for "slack".
	MaxTextBytes int `json:"maxTextBytes,omitempty"`
}

// TLSConfig configures https connections: the tls block all sinks share.
type TLSConfig = sinktls.Config

// reservedHeaders are set by the sink or by net/http.
var reservedHeaders = []string{"Content-Type", "Content-Length", "Host", "Transfer-Encoding", "Connection", "Idempotency-Key"}

// Validate checks cfg; path is where cfg sits in the configuration.
func (cfg Config) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	up := path.Child("url")
	if cfg.URL == "" {
		errs = append(errs, field.Required(up, "the URL to POST to"))
	} else if u, err := url.Parse(cfg.URL); err != nil {
		errs = append(errs, field.Invalid(up, redact(cfg.URL), "not a URL"))
	} else {
		if u.Scheme != "http" && u.Scheme != "https" {
			errs = append(errs, field.Invalid(up, redact(cfg.URL), "the scheme must be http or https"))
		} else if u.Host == "" {
			errs = append(errs, field.Invalid(up, redact(cfg.URL), "has no host"))
		}
		if u.Scheme == "http" && cfg.TLS.IsSet() {
			errs = append(errs, field.Invalid(path.Child("tls"), "", "TLS settings need an https URL"))
		}
	}
	hp := path.Child("headers")
	for _, name := range slices.Sorted(maps.Keys(cfg.Headers)) {
		value := cfg.Headers[name]
		switch {
		case !httpguts.ValidHeaderFieldName(name):
			errs = append(errs, field.Invalid(hp.Key(name), name, "not a valid header name"))
		case !httpguts.ValidHeaderFieldValue(value):
			errs = append(errs, field.Invalid(hp.Key(name), "", "not a valid header value (control characters?)"))
		}
		for _, r := range reservedHeaders {
			if strings.EqualFold(name, r) {
				errs = append(errs, field.Forbidden(hp.Key(name), "set by the sink"))
			}
		}
		if strings.EqualFold(name, "Authorization") && (cfg.BearerToken != "" || cfg.BearerTokenFile != "") {
			errs = append(errs, field.Forbidden(hp.Key(name), "set by bearerToken or bearerTokenFile"))
		}
	}
	if cfg.BearerToken != "" && cfg.BearerTokenFile != "" {
		errs = append(errs, field.Forbidden(path.Child("bearerTokenFile"), "bearerToken and bearerTokenFile may not both be set"))
	}
	errs = append(errs, cfg.TLS.Validate(path.Child("tls"))...)
	if cfg.Timeout.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("timeout"), cfg.Timeout.Duration.String(), "must not be negative"))
	}
	switch cfg.Format {
	case "", FormatRecords:
		if cfg.MaxTextBytes != 0 {
			errs = append(errs, field.Forbidden(path.Child("maxTextBytes"), "only for format slack"))
		}
	case FormatSlack:
		if cfg.MaxTextBytes != 0 && cfg.MaxTextBytes < MinMaxTextBytes {
			errs = append(errs, field.Invalid(path.Child("maxTextBytes"), cfg.MaxTextBytes, fmt.Sprintf("must be at least %d", MinMaxTextBytes)))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("format"), cfg.Format, []string{FormatRecords, FormatSlack}))
	}
	return errs
}

// Options are a sink's dependencies, set by code rather than configuration.
type Options struct {
	// Clock reads the time to turn a Retry-After date into a duration.
	// Default the real clock.
	Clock clock.PassiveClock
	// UserAgent is sent with every POST. Default "kubevents-export".
	UserAgent string
}

// Sink POSTs batches to a webhook. It implements export.Sink.
type Sink struct {
	url          string
	target       string // scheme://host, for messages
	headers      http.Header
	format       string
	timeout      time.Duration
	maxTextBytes int
	clock        clock.PassiveClock
	transport    *http.Transport
	client       *http.Client
	// recordBytes is the mean size of a record's JSON in the last batch:
	// the next batch's buffer is allocated at its expected size at once
	// rather than grown (and copied) a dozen times. Send is never called
	// concurrently.
	recordBytes int
}

var _ export.Sink = (*Sink)(nil)

// New returns a sink for cfg. It reads the bearer token and TLS files, and
// fails if one cannot be read or is invalid.
func New(cfg Config, opts Options) (*Sink, error) {
	if errs := cfg.Validate(field.NewPath("webhook")); len(errs) > 0 {
		return nil, fmt.Errorf("webhook sink: %w", errs.ToAggregate())
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.UserAgent == "" {
		opts.UserAgent = defaultUserAgent
	}
	s := &Sink{
		url:          cfg.URL,
		target:       redact(cfg.URL),
		headers:      make(http.Header, len(cfg.Headers)+3),
		format:       cfg.Format,
		timeout:      cfg.Timeout.Duration,
		maxTextBytes: cfg.MaxTextBytes,
		clock:        opts.Clock,
	}
	if s.format == "" {
		s.format = FormatRecords
	}
	if s.timeout == 0 {
		s.timeout = DefaultTimeout
	}
	if s.maxTextBytes == 0 {
		s.maxTextBytes = DefaultMaxTextBytes
	}
	for k, v := range cfg.Headers {
		s.headers.Set(k, v)
	}
	s.headers.Set("Content-Type", "application/json")
	s.headers.Set("User-Agent", opts.UserAgent)

	tlsConfig, err := cfg.TLS.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("webhook sink %s: %w", s.target, err)
	}
	dialer := &net.Dialer{Timeout: s.timeout, KeepAlive: 30 * time.Second}
	s.transport = &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   s.timeout,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          maxIdleConns,
		MaxIdleConnsPerHost:   maxIdleConns,
		IdleConnTimeout:       idleConnTimeout,
		ExpectContinueTimeout: time.Second,
	}
	var rt http.RoundTripper = s.transport
	if cfg.BearerToken != "" || cfg.BearerTokenFile != "" {
		rt, err = transport.NewBearerAuthWithRefreshRoundTripper(cfg.BearerToken, cfg.BearerTokenFile, rt)
		if err != nil {
			return nil, fmt.Errorf("webhook sink %s: bearerTokenFile: %w", s.target, err)
		}
	}
	s.client = &http.Client{
		Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return s, nil
}

// Send POSTs batch: one POST in the records format, one or more in the
// slack format. See the package documentation for what answers mean.
func (s *Sink) Send(ctx context.Context, batch []export.Record) error {
	if len(batch) == 0 {
		return nil
	}
	if s.format == FormatSlack {
		texts := slackTexts(batch, s.maxTextBytes)
		for i, text := range texts {
			body, err := json.Marshal(slackMessage{Text: text})
			if err != nil {
				return fmt.Errorf("webhook %s: %w: %w", s.target, export.ErrRejected, err)
			}
			if err := s.post(ctx, body, ""); err != nil {
				if len(texts) > 1 {
					return fmt.Errorf("message %d of %d: %w", i+1, len(texts), err)
				}
				return err
			}
		}
		return nil
	}
	body, err := encodeRecords(batch, s.recordBytes)
	if err != nil {
		// A record that cannot be encoded cannot be sent, however often.
		return fmt.Errorf("webhook %s: encoding the batch: %w: %w", s.target, export.ErrRejected, err)
	}
	s.recordBytes = len(body) / len(batch)
	return s.post(ctx, body, BatchKey(batch))
}

// encodeRecords writes batch as a JSON array, each record as its
// MarshalJSON writes it, into one buffer (json.Marshal of the slice would
// scan each record's JSON again to compact it) sized for records of about
// recordBytes each.
func encodeRecords(batch []export.Record, recordBytes int) ([]byte, error) {
	var b bytes.Buffer
	// An eighth more, so that a batch a little larger than the last
	// rarely grows; the buffer is the request's body, not kept.
	b.Grow(2 + len(batch)*(recordBytes+1) + len(batch)*recordBytes/8)
	b.WriteByte('[')
	for i, r := range batch {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := r.WriteJSON(&b); err != nil {
			return nil, fmt.Errorf("record %s: %w", r.Key, err)
		}
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

// BatchKey is the Idempotency-Key header of a batch in the records format:
// the key of its only record, or "<first key>..<last key>".
func BatchKey(batch []export.Record) string {
	switch len(batch) {
	case 0:
		return ""
	case 1:
		return batch[0].Key
	}
	return batch[0].Key + ".." + batch[len(batch)-1].Key
}

// Close closes the sink's idle connections.
func (s *Sink) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}

func (s *Sink) post(ctx context.Context, body []byte, idempotencyKey string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("webhook %s: %w", s.target, err)
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook %s: %w: %w", s.target, export.ErrRejected, err)
	}
	for k, v := range s.headers {
		req.Header[k] = v
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// url.Error's message holds the whole URL; keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("webhook %s: no answer within the timeout of %v: %w", s.target, s.timeout, err)
		}
		return fmt.Errorf("webhook %s: %w", s.target, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainBytes))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytes+1))
	return &StatusError{
		Target:     s.target,
		Code:       resp.StatusCode,
		Body:       readable(snippet, errorBodyBytes),
		retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), s.clock.Now()),
	}
}

// StatusError is a webhook's answer other than 2xx. It wraps
// export.ErrRejected unless the answer is retryable (408, 429, 5xx).
type StatusError struct {
	// Target is the URL's scheme and host.
	Target string
	// Code is the HTTP status code.
	Code int
	// Body is the start of the answer's body, made printable.
	Body       string
	retryAfter time.Duration
}

// Error says what the webhook answered.
func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "webhook %s answered %d %s", e.Target, e.Code, http.StatusText(e.Code))
	if e.Retryable() {
		b.WriteString(" (retryable")
		if e.retryAfter > 0 {
			fmt.Fprintf(&b, ", retry after %v", e.retryAfter)
		}
		b.WriteString(")")
	} else if e.Code >= 300 && e.Code < 400 {
		b.WriteString(" (redirects are not followed: set url to the final address)")
	}
	if e.Body != "" {
		b.WriteString(": ")
		b.WriteString(e.Body)
	}
	return b.String()
}

// Retryable says whether sending the batch again may succeed: 408, 429
// and 5xx answers.
func (e *StatusError) Retryable() bool {
	return e.Code == http.StatusRequestTimeout || e.Code == http.StatusTooManyRequests || e.Code >= 500
}

// Unwrap returns export.ErrRejected for answers that are not retryable.
func (e *StatusError) Unwrap() error {
	if e.Retryable() {
		return nil
	}
	return export.ErrRejected
}

// RetryAfter is how long the webhook asked to wait (its Retry-After
// header), or 0.
func (e *StatusError) RetryAfter() time.Duration {
	return e.retryAfter
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		// Bound the product: a day is longer than any sensible answer.
		return time.Duration(min(secs, 24*3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), 24*time.Hour)
	}
	return 0
}

// readable makes b printable on one line, at most limit bytes and a marker.
func readable(b []byte, limit int) string {
	cut := len(b) > limit
	if cut {
		b = b[:limit]
	}
	s := strings.ToValidUTF8(string(b), "")
	if cut {
		// Cutting may have split a rune; ToValidUTF8 removed its rest.
		s += "…"
	}
	return strings.Join(strings.Fields(s), " ")
}

// redact returns the scheme and host of rawURL: webhook URLs can hold
// secrets in their path, query and user info.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "<unparsable URL>"
	}
	return u.Scheme + "://" + u.Host
}
