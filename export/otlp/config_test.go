package otlp_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/kubevents/kubevents/export/otlp"
)

func TestConfigFromYAML(t *testing.T) {
	const doc = `
protocol: http
endpoint: https://collector.example:4318/v1/logs
headers:
  Authorization: Bearer x
tls:
  caFile: /etc/ca.pem
  certFile: /etc/cert.pem
  keyFile: /etc/key.pem
  serverName: collector
timeout: 2.5s
`
	var got otlp.Config
	if err := yaml.UnmarshalStrict([]byte(doc), &got); err != nil {
		t.Fatal(err)
	}
	want := otlp.Config{
		Protocol: "http", Endpoint: "https://collector.example:4318/v1/logs",
		Headers: map[string]string{"Authorization": "Bearer x"},
		TLS:     &otlp.TLSConfig{CAFile: "/etc/ca.pem", CertFile: "/etc/cert.pem", KeyFile: "/etc/key.pem", ServerName: "collector"},
		Timeout: metav1.Duration{Duration: 2500 * time.Millisecond},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if errs := got.Validate(field.NewPath("otlp")); len(errs) != 0 {
		t.Fatalf("Validate: %v", errs)
	}
}

func TestValidate(t *testing.T) {
	base := field.NewPath("sinks").Index(0).Child("otlp")
	cases := []struct {
		name string
		cfg  otlp.Config
		// want lists "type field" of each expected error, in order.
		want []string
	}{
		{"grpc default protocol", otlp.Config{Endpoint: "collector:4317"}, nil},
		{"grpc insecure", otlp.Config{Protocol: "grpc", Endpoint: "127.0.0.1:4317", Insecure: true}, nil},
		{"http plaintext", otlp.Config{Protocol: "http", Endpoint: "http://collector:4318"}, nil},
		{"http insecure with http", otlp.Config{Protocol: "http", Endpoint: "http://collector:4318", Insecure: true}, nil},
		{"unknown protocol", otlp.Config{Protocol: "udp", Endpoint: "c:1"},
			[]string{"FieldValueNotSupported sinks[0].otlp.protocol"}},
		{"missing endpoint", otlp.Config{},
			[]string{"FieldValueRequired sinks[0].otlp.endpoint"}},
		{"grpc with scheme", otlp.Config{Endpoint: "http://collector:4317"},
			[]string{"FieldValueInvalid sinks[0].otlp.endpoint"}},
		{"grpc without port", otlp.Config{Endpoint: "collector"},
			[]string{"FieldValueInvalid sinks[0].otlp.endpoint"}},
		{"grpc bad port", otlp.Config{Endpoint: "collector:http"},
			[]string{"FieldValueInvalid sinks[0].otlp.endpoint"}},
		{"http without scheme", otlp.Config{Protocol: "http", Endpoint: "collector:4318"},
			[]string{"FieldValueInvalid sinks[0].otlp.endpoint"}},
		{"http with query", otlp.Config{Protocol: "http", Endpoint: "https://collector:4318/v1/logs?x=1"},
			[]string{"FieldValueInvalid sinks[0].otlp.endpoint"}},
		{"http insecure with https", otlp.Config{Protocol: "http", Endpoint: "https://collector:4318", Insecure: true},
			[]string{"FieldValueInvalid sinks[0].otlp.insecure"}},
		{"tls with insecure", otlp.Config{Endpoint: "c:4317", Insecure: true, TLS: &otlp.TLSConfig{CAFile: "ca.pem"}},
			[]string{"FieldValueForbidden sinks[0].otlp.tls"}},
		{"tls with http URL", otlp.Config{Protocol: "http", Endpoint: "http://c:4318", TLS: &otlp.TLSConfig{CAFile: "ca.pem"}},
			[]string{"FieldValueForbidden sinks[0].otlp.tls"}},
		{"cert without key", otlp.Config{Endpoint: "c:4317", TLS: &otlp.TLSConfig{CertFile: "c.pem"}},
			[]string{"FieldValueRequired sinks[0].otlp.tls.keyFile"}},
		{"key without cert", otlp.Config{Endpoint: "c:4317", TLS: &otlp.TLSConfig{KeyFile: "k.pem"}},
			[]string{"FieldValueRequired sinks[0].otlp.tls.certFile"}},
		{"bad header name", otlp.Config{Endpoint: "c:4317", Headers: map[string]string{"bad name": "v"}},
			[]string{"FieldValueInvalid sinks[0].otlp.headers[bad name]"}},
		{"grpc metadata key", otlp.Config{Endpoint: "c:4317", Headers: map[string]string{"X-Scope.OrgID_1": "v"}}, nil},
		{"grpc bad metadata key", otlp.Config{Endpoint: "c:4317", Headers: map[string]string{"X~Tenant": "v"}},
			[]string{"FieldValueInvalid sinks[0].otlp.headers[X~Tenant]"}},
		{"grpc reserved metadata key", otlp.Config{Endpoint: "c:4317", Headers: map[string]string{"grpc-timeout": "1S"}},
			[]string{"FieldValueInvalid sinks[0].otlp.headers[grpc-timeout]"}},
		{"http header not a metadata key", otlp.Config{Protocol: "http", Endpoint: "http://c:4318", Headers: map[string]string{"X~Tenant": "v"}}, nil},
		{"bad header value", otlp.Config{Endpoint: "c:4317", Headers: map[string]string{"X-A": "line\nbreak"}},
			[]string{"FieldValueInvalid sinks[0].otlp.headers[X-A]"}},
		{"negative timeout", otlp.Config{Endpoint: "c:4317", Timeout: metav1.Duration{Duration: -time.Second}},
			[]string{"FieldValueInvalid sinks[0].otlp.timeout"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.cfg.Validate(base)
			var got []string
			for _, e := range errs {
				got = append(got, string(e.Type)+" "+e.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("errors %v (-want +got):\n%s", errs, diff)
			}
		})
	}
}

func TestValidateDoesNotEchoHeaderValues(t *testing.T) {
	cfg := otlp.Config{Endpoint: "c:4317", Headers: map[string]string{"Authorization": "secret\n"}}
	if msg := cfg.Validate(field.NewPath("otlp")).ToAggregate().Error(); strings.Contains(msg, "secret") {
		t.Fatalf("error reveals the header value: %s", msg)
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	_, err := otlp.New(otlp.Config{Protocol: "udp"}, otlp.Options{})
	if err == nil || !strings.Contains(err.Error(), "otlp.protocol") || !strings.Contains(err.Error(), "otlp.endpoint") {
		t.Fatalf("New: %v, want errors naming otlp.protocol and otlp.endpoint", err)
	}
}

func TestNewReportsUnreadableTLSFiles(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	cases := []struct {
		tls  otlp.TLSConfig
		want string
	}{
		{otlp.TLSConfig{CAFile: missing}, "tls.caFile"},
		{otlp.TLSConfig{CertFile: missing, KeyFile: missing}, "tls.certFile"},
	}
	for _, tc := range cases {
		_, err := otlp.New(otlp.Config{Endpoint: "127.0.0.1:4317", TLS: &tc.tls}, otlp.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New with %+v: %v, want an error naming %s", tc.tls, err, tc.want)
		}
	}
}
