package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTLSFileErrorsNameTheirFlag: a missing or unusable TLS file stops
// eventsd before it opens its store or listens, with an error naming the
// flag and the path.
func TestTLSFileErrorsNameTheirFlag(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		what, cert, key string
		want            []string
	}{
		{"missing certificate", missing, garbage, []string{"--tls-cert-file", missing}},
		{"missing key", garbage, missing, []string{"--tls-private-key-file", missing}},
		{"unusable pair", garbage, garbage, []string{"--tls-cert-file", "--tls-private-key-file", garbage}},
	} {
		dataDir := filepath.Join(dir, "data")
		cmd := newCommand()
		cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--data-dir", dataDir, "--tls-cert-file", tc.cert, "--tls-private-key-file", tc.key})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.ExecuteContext(context.Background())
		if err == nil {
			t.Fatalf("%s: eventsd started", tc.what)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: error %q does not name %q", tc.what, err, w)
			}
		}
		if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
			t.Fatalf("%s: the store was opened before the TLS files were checked", tc.what)
		}
	}
}

// TestClientCertificatesNeedTLS: the front proxy's CA (or a client CA)
// without HTTPS stops eventsd before it opens its store, saying why:
// client certificates come over TLS only.
func TestClientCertificatesNeedTLS(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("unused"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--requestheader-client-ca-file", "--client-ca-file"} {
		dataDir := filepath.Join(dir, "data")
		cmd := newCommand()
		cmd.SetArgs([]string{"--listen", "127.0.0.1:0", "--data-dir", dataDir, flag, ca})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), flag) || !strings.Contains(err.Error(), "need --tls-cert-file") {
			t.Fatalf("%s without TLS: %v", flag, err)
		}
		if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
			t.Fatalf("%s without TLS: the store was opened", flag)
		}
	}
}
