package sinktls_test

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubevents/kubevents/export/sinktls"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestValidate names the field at fault.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c    *sinktls.Config
		want string
	}{
		{nil, ""},
		{&sinktls.Config{CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem"}, ""},
		{&sinktls.Config{CertFile: "c.pem"}, "sink.tls.keyFile: Required value"},
		{&sinktls.Config{KeyFile: "k.pem"}, "sink.tls.certFile: Required value"},
		{&sinktls.Config{CAFile: "ca.pem", InsecureSkipVerify: true}, "sink.tls.insecureSkipVerify: Forbidden"},
	} {
		errs := tc.c.Validate(field.NewPath("sink", "tls"))
		if got := errs.ToAggregate(); (tc.want == "") != (got == nil) || (got != nil && !strings.Contains(got.Error(), tc.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.c, got, tc.want)
		}
	}
}

// TestClientConfig: defaults without settings, errors naming the file.
func TestClientConfig(t *testing.T) {
	var none *sinktls.Config
	cfg, err := none.ClientConfig()
	if err != nil || cfg.MinVersion != tls.VersionTLS12 || cfg.RootCAs != nil {
		t.Errorf("nil config: %+v, %v; want the system's roots and TLS 1.2", cfg, err)
	}
	cfg, err = (&sinktls.Config{ServerName: "collector.test"}).ClientConfig()
	if err != nil || cfg.ServerName != "collector.test" {
		t.Errorf("server name: %+v, %v", cfg, err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	if _, err := (&sinktls.Config{CAFile: missing}).ClientConfig(); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("missing CA file: %v, want an error naming it", err)
	}
}
