// Package ociregistry stands in, on this machine, for the OCI registry a
// kubevents release publishes its Helm chart to (ghcr.io), so that a test
// can run the README's install line verbatim:
//
//	helm install eventsd oci://ghcr.io/kubevents/charts/eventsd --version 0.1.0 ...
//
// ghcr.io cannot be reached from the tests (there is no network) and must
// not be tried, and the command must not be rewritten (a test of the
// documented line that changes the line tests something else). So a
// Server is three things:
//
//   - a Registry: a read-only OCI distribution API (the part helm's OCI
//     client, oras-go, uses to pull: /v2/, manifests, blobs and tag lists)
//     serving Helm charts given as the .tgz files `helm package` writes,
//     each as `helm push` would have stored it (an OCI image manifest whose
//     config is the chart's Chart.yaml as JSON and whose one layer is the
//     .tgz, byte for byte);
//   - that registry served over HTTPS on 127.0.0.1, with a certificate for
//     the registry's host name (ghcr.io) signed by a CA of the Server's own
//     (internal/testpki);
//   - a Proxy: an HTTP CONNECT proxy on 127.0.0.1 that tunnels CONNECTs to
//     host:443 to that HTTPS server and refuses (403, logged and counted)
//     every other destination and every plain proxied request, so that a
//     child process pointed at it reaches nothing off this machine.
//
// Server.Env gives a child process (helm, kubectl, a shell running the
// README's lines) HTTPS_PROXY pointing at the proxy, NO_PROXY keeping
// loopback and the caller's addresses (a cluster's API server) direct, and
// SSL_CERT_FILE naming the CA's certificate, which Go programs on Linux
// (helm is one) trust in place of the system's bundle file.
//
// In a test:
//
//	s, err := ociregistry.New(ociregistry.Options{NoProxy: []string{"172.31.0.0/16"}, Logf: t.Logf})
//	...
//	defer s.Close()
//	_, err = s.AddChart("kubevents/charts/eventsd", tgz) // from helm package
//	cmd := exec.Command("helm", "install", "eventsd", "oci://ghcr.io/kubevents/charts/eventsd", ...)
//	cmd.Env = append(os.Environ(), s.Env()...)
//
// and afterwards s.Refused() lists whatever the command tried to reach
// besides ghcr.io:443.
//
// It is for tests only: it keeps everything in memory and accepts no
// pushes.
package ociregistry
