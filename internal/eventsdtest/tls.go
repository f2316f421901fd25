package eventsdtest

import "crypto/tls"

// insecureTLS is for probing a test server's self-signed certificate.
func insecureTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} } //nolint:gosec // loopback test server
