// Package sinktls is the TLS client configuration the export sinks share:
// the `tls` block of a sink in the export configuration file, its
// validation, and the *tls.Config it makes. Files are read by client-go's
// transport package, as for a kubeconfig; a client certificate is loaded
// again when its files change, so rotated certificates are picked up.
package sinktls

import (
	"crypto/tls"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/transport"
)

// Config configures a sink's TLS client. Files are PEM.
type Config struct {
	// CAFile holds the certificates that verify the server's; default
	// the system's roots.
	CAFile string `json:"caFile,omitempty"`
	// CertFile and KeyFile are the client certificate and its key, for
	// servers that ask for one. Both or neither. They are loaded when the
	// sink is created, and again, at most once a second, when a
	// connection is made, so rotated files are picked up.
	CertFile string `json:"certFile,omitempty"`
	// KeyFile is CertFile's private key.
	KeyFile string `json:"keyFile,omitempty"`
	// ServerName is the name the server's certificate is verified
	// against (and sent in SNI), instead of the endpoint's host.
	ServerName string `json:"serverName,omitempty"`
	// InsecureSkipVerify does not verify the server's certificate. For
	// tests only; not with CAFile.
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// IsSet reports whether any field is set.
func (c *Config) IsSet() bool { return c != nil && *c != Config{} }

// Validate returns c's errors, under path (the sink's tls field).
func (c *Config) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c == nil {
		return nil
	}
	switch {
	case c.CertFile != "" && c.KeyFile == "":
		errs = append(errs, field.Required(path.Child("keyFile"), "certFile is set"))
	case c.CertFile == "" && c.KeyFile != "":
		errs = append(errs, field.Required(path.Child("certFile"), "keyFile is set"))
	}
	if c.InsecureSkipVerify && c.CAFile != "" {
		errs = append(errs, field.Forbidden(path.Child("insecureSkipVerify"), "not with caFile"))
	}
	return errs
}

// ClientConfig reads c's files and returns the TLS client configuration
// (TLS 1.2 at least); a nil c gives the defaults (the system's roots).
// Errors name the field and file at fault.
func (c *Config) ClientConfig() (*tls.Config, error) {
	if !c.IsSet() {
		return &tls.Config{MinVersion: tls.VersionTLS12}, nil
	}
	tc := &transport.Config{TLS: transport.TLSConfig{
		CAFile:         c.CAFile,
		CertFile:       c.CertFile,
		KeyFile:        c.KeyFile,
		ReloadTLSFiles: c.CertFile != "",
		ServerName:     c.ServerName,
		Insecure:       c.InsecureSkipVerify,
	}}
	cfg, err := transport.TLSConfigFor(tc)
	if err != nil {
		return nil, fmt.Errorf("tls.caFile %s, tls.certFile %s: %w", c.CAFile, c.CertFile, err)
	}
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if c.CertFile != "" {
		// TLSConfigFor loaded the files; with reloading on it checks the
		// pair only at the first handshake, so check it now.
		if _, err := tls.X509KeyPair(tc.TLS.CertData, tc.TLS.KeyData); err != nil {
			return nil, fmt.Errorf("tls.certFile %s and tls.keyFile %s: %w", c.CertFile, c.KeyFile, err)
		}
	}
	return cfg, nil
}
