package main

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// requestTimeout bounds every request, so that a stuck server cannot hang
// the benchmark.
const requestTimeout = 30 * time.Second

// newClientset returns a typed clientset with no client-side rate limiting
// and its own HTTP transport, holding one HTTP/1.1 connection at a time.
//
// client-go shares transports between configs that look alike: over plain
// HTTP with no TLS options it even hands out http.DefaultTransport, which
// keeps only 2 idle connections per host, so 64 "clients" would share one
// pool and churn connections. So each clientset gets its own http.Transport
// (rest.Config.Transport; client-go still adds its usual wrappers, such as
// the user agent), configured as client-go configures its own
// (utilnet.SetTransportDefaults) but with MaxConnsPerHost 1: one goroutine
// issues one request at a time on it, and the limit keeps net/http from
// dialing a second connection when a request starts before the previous
// connection is back in the idle pool. Plain http://, so no HTTP/2. So a
// client holds one connection at a time; should net/http drop one, the
// next request dials a replacement. dials, if not nil, counts the
// connections opened (reported, so that churn would show).
// Wire formats of the typed clients: client-go's default for built-in types
// (protobuf, since client-go v0.35, as the kubelet and controllers send),
// or JSON (as kubectl and most non-Go clients send).
const (
	wireProtobuf = "protobuf"
	wireJSON     = "json"
)

func checkWire(w string) error {
	if w != wireProtobuf && w != wireJSON {
		return fmt.Errorf("--wire must be %s or %s, not %q", wireProtobuf, wireJSON, w)
	}
	return nil
}

func newClientset(server, wire string, dials *atomic.Int64) (kubernetes.Interface, error) {
	return newClientsetAuth(server, wire, "", dials)
}

// newClientsetAuth is newClientset sending token as a bearer token when
// not empty. An https server's certificate is not verified: the only
// https server here is the benchmark's own kube-apiserver on loopback,
// with the certificate of internal/kubeapiserver's CA (over TLS,
// client-go negotiates HTTP/2, still one connection per clientset).
func newClientsetAuth(server, wire, token string, dials *atomic.Int64) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(restConfigAuth(server, wire, token, dials))
}

// restConfigAuth is the rest.Config of newClientsetAuth.
func restConfigAuth(server, wire, token string, dials *atomic.Int64) *rest.Config {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		MaxConnsPerHost:     1,
		MaxIdleConnsPerHost: 1,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials != nil {
				dials.Add(1)
			}
			return d.DialContext(ctx, network, addr)
		},
	}
	if strings.HasPrefix(server, "https://") {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the benchmark's own loopback kube-apiserver, self-signed
	}
	tr = utilnet.SetTransportDefaults(tr)
	cfg := &rest.Config{
		Host:        server,
		QPS:         -1, // no client-side rate limiting
		Timeout:     requestTimeout,
		Transport:   tr,
		BearerToken: token,
	}
	if wire == wireJSON {
		cfg.ContentConfig = rest.ContentConfig{ContentType: "application/json"}
	}
	return cfg
}

// lastNano makes event names unique within the process: it is the last
// timestamp handed out by uniqueNano.
var lastNano atomic.Int64

// uniqueNano returns the current Unix time in nanoseconds, bumped past any
// value it returned before, so that "<pod>.<hex nanos>" names never collide
// between concurrent clients of one process.
func uniqueNano() int64 {
	for {
		now, last := time.Now().UnixNano(), lastNano.Load()
		if now <= last {
			now = last + 1
		}
		if lastNano.CompareAndSwap(last, now) {
			return now
		}
	}
}

// pod is the object events are about.
type pod struct {
	Namespace, Name string
	UID             types.UID
	Node            string
}

func newPod(ns, name string) pod {
	h := sha1.Sum([]byte(ns + "/" + name))
	uid := fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
	return pod{Namespace: ns, Name: name, UID: types.UID(uid), Node: fmt.Sprintf("node-%02d", h[16]%20)}
}

// namespaceName is the i-th benchmark namespace.
func namespaceName(i int) string { return "bench-" + strconv.Itoa(i) }

// lifecycle is what a kubelet reports about a pod, in order.
var lifecycle = []struct {
	typ, reason, message string
}{
	{corev1.EventTypeNormal, "Pulling", `Pulling image "registry.k8s.io/e2e-test-images/agnhost:2.53"`},
	{corev1.EventTypeNormal, "Pulled", `Successfully pulled image "registry.k8s.io/e2e-test-images/agnhost:2.53" in 1.204s (1.204s including waiting). Image size: 52139218 bytes.`},
	{corev1.EventTypeNormal, "Created", "Created container: app"},
	{corev1.EventTypeNormal, "Started", "Started container app"},
	{corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container app in pod %s_%s(%s)"},
	{corev1.EventTypeWarning, "Unhealthy", "Readiness probe failed: Get \"http://10.244.1.17:8080/readyz\": dial tcp 10.244.1.17:8080: connect: connection refused"},
	{corev1.EventTypeNormal, "Killing", "Stopping container app"},
}

// newEvent returns an event shaped like the ones client-go's legacy
// recorder (tools/record, as used by the kubelet) creates: name
// "<pod>.<unixnano hex>", the pod as involvedObject, source and reporting
// controller kubelet on the pod's node, count 1, first and last timestamps.
func newEvent(p pod, seq int) *corev1.Event {
	nano := uniqueNano()
	t := metav1.Time{Time: time.Unix(0, nano)}
	l := lifecycle[seq%len(lifecycle)]
	msg := l.message
	if l.reason == "BackOff" {
		msg = fmt.Sprintf(msg, p.Name, p.Namespace, p.UID)
	}
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      p.Name + "." + strconv.FormatInt(nano, 16),
			Namespace: p.Namespace,
		},
		InvolvedObject: corev1.ObjectReference{
			Kind:            "Pod",
			Namespace:       p.Namespace,
			Name:            p.Name,
			UID:             p.UID,
			APIVersion:      "v1",
			ResourceVersion: "4242",
			FieldPath:       "spec.containers{app}",
		},
		Reason:              l.reason,
		Message:             msg,
		Source:              corev1.EventSource{Component: "kubelet", Host: p.Node},
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		Type:                l.typ,
		ReportingController: "kubelet",
		ReportingInstance:   p.Node,
	}
}

// podSelector is the field selector kubectl describe/events use for one
// pod's events.
func podSelector(name string) string {
	return "involvedObject.kind=Pod,involvedObject.apiVersion=v1,involvedObject.name=" + name
}
