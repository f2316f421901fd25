package clusterdns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitLimit bounds every wait on the server (sync, an informer seeing a
// change); reaching it fails the test, it is not a timing assertion.
const waitLimit = 30 * time.Second

func clusterIPService(ns, name string, ips []string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ips[0], ClusterIPs: ips, Ports: ports},
	}
}

func headlessService(ns, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone, ClusterIPs: []string{corev1.ClusterIPNone}},
	}
}

func externalNameService(ns, name, target string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: target},
	}
}

// ep is an endpoint of a slice: its address, hostname ("" for none) and
// ready condition (nil for unset).
type ep struct {
	addr  string
	host  string
	ready *bool
}

func endpointSlice(ns, svc, name string, addrType discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc},
		},
		AddressType: addrType,
		Ports:       ports,
	}
	for _, e := range eps {
		var host *string
		if e.host != "" {
			host = ptr.To(e.host)
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{e.addr},
			Hostname:   host,
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready},
		})
	}
	return s
}

// manyEndpoints returns n ready endpoints from 10.245.0.1 up.
func manyEndpoints(n int) []ep {
	eps := make([]ep, n)
	for i := range eps {
		eps[i] = ep{addr: fmt.Sprintf("10.245.%d.%d", (i+1)/256, (i+1)%256)}
	}
	return eps
}

// fixtures are the cluster the tests query.
func fixtures() []runtime.Object {
	pg := []discoveryv1.EndpointPort{{Name: ptr.To("pg"), Port: ptr.To[int32](5432), Protocol: ptr.To(corev1.ProtocolTCP)}}
	objs := []runtime.Object{
		clusterIPService("default", "web", []string{"10.96.0.10"}, corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}),
		endpointSlice("default", "web", "web-abc", discoveryv1.AddressTypeIPv4, nil, ep{addr: "10.244.0.2"}),
		clusterIPService("other", "web", []string{"10.96.1.10"}),
		clusterIPService("default", "dual", []string{"10.96.0.20", "fd00::20"}),
		headlessService("default", "db"),
		endpointSlice("default", "db", "db-abc", discoveryv1.AddressTypeIPv4, pg,
			ep{addr: "10.244.0.5", host: "db-0", ready: ptr.To(true)},
			ep{addr: "10.244.0.6", host: "db-1"},
			ep{addr: "10.244.0.7", host: "db-2", ready: ptr.To(false)}),
		// A second slice repeating an address: it is answered once.
		endpointSlice("default", "db", "db-def", discoveryv1.AddressTypeIPv4, pg, ep{addr: "10.244.0.5", host: "db-0"}),
		endpointSlice("default", "db", "db-v6", discoveryv1.AddressTypeIPv6, pg, ep{addr: "fd00::5", host: "db-0"}),
		headlessService("default", "empty"),
		externalNameService("default", "ext", "example.com"),
		externalNameService("default", "alias", "web.default.svc.cluster.local"),
		externalNameService("default", "loop", "loop.default.svc.cluster.local"),
		headlessService("default", "many"),
		endpointSlice("default", "many", "many-abc", discoveryv1.AddressTypeIPv4, nil, manyEndpoints(60)...),
		headlessService("default", "big"),
		endpointSlice("default", "big", "big-abc", discoveryv1.AddressTypeIPv4, nil, manyEndpoints(200)...),
		headlessService("default", "huge"),
	}
	huge := manyEndpoints(5000)
	for i := 0; i < len(huge); i += 1000 {
		objs = append(objs, endpointSlice("default", "huge", fmt.Sprintf("huge-%d", i), discoveryv1.AddressTypeIPv4, nil, huge[i:i+1000]...))
	}
	return objs
}

// testServer is a Server serving on loopback UDP and TCP sockets.
type testServer struct {
	srv      *Server
	client   *fake.Clientset
	udp, tcp string
	stop     func() error // ends Serve and returns what it returned
}

// start runs a Server of cfg (its Client set to a fake clientset of objs)
// until the test ends, and waits until it is ready unless noWait.
func start(t *testing.T, cfg Config, client *fake.Clientset, noWait bool) *testServer {
	t.Helper()
	cfg.Client = client
	cfg.Logf = t.Logf
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = pc.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, pc, l) }()
	ts := &testServer{srv: srv, client: client, udp: pc.LocalAddr().String(), tcp: l.Addr().String()}
	ts.stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() {
		if err := ts.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	if !noWait {
		wctx, wcancel := context.WithTimeout(ctx, waitLimit)
		defer wcancel()
		if err := srv.WaitReady(wctx); err != nil {
			t.Fatal(err)
		}
	}
	return ts
}

// resolver is Go's own resolver asking ts whatever the system's
// resolv.conf names.
func (ts *testServer) resolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			if strings.HasPrefix(network, "tcp") {
				return d.DialContext(ctx, "tcp", ts.tcp)
			}
			return d.DialContext(ctx, "udp", ts.udp)
		},
	}
}

func TestResolver(t *testing.T) {
	ts := start(t, Config{}, fake.NewClientset(fixtures()...), false)
	r := ts.resolver()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	big := manyEndpoints(200)
	bigAddrs := make([]string, len(big))
	for i, e := range big {
		bigAddrs[i] = e.addr
	}
	hosts := []struct {
		name string
		want []string // nil: no such host
	}{
		{"web.default.svc.cluster.local.", []string{"10.96.0.10"}},
		{"WEB.Default.SVC.cluster.LOCAL.", []string{"10.96.0.10"}},
		{"web.other.svc.cluster.local.", []string{"10.96.1.10"}},
		{"dual.default.svc.cluster.local.", []string{"10.96.0.20", "fd00::20"}},
		{"db.default.svc.cluster.local.", []string{"10.244.0.5", "10.244.0.6", "fd00::5"}},
		{"db-0.db.default.svc.cluster.local.", []string{"10.244.0.5", "fd00::5"}},
		{"db-1.db.default.svc.cluster.local.", []string{"10.244.0.6"}},
		{"db-2.db.default.svc.cluster.local.", nil}, // not ready
		{"10-244-0-6.db.default.svc.cluster.local.", nil},
		{"10-244-0-2.web.default.svc.cluster.local.", []string{"10.244.0.2"}},
		{"alias.default.svc.cluster.local.", []string{"10.96.0.10"}},
		{"empty.default.svc.cluster.local.", nil},
		{"nope.default.svc.cluster.local.", nil},
		{"web.nons.svc.cluster.local.", nil},
		{"10-1-2-3.default.pod.cluster.local.", []string{"10.1.2.3"}},
		{"fd00--7.default.pod.cluster.local.", []string{"fd00::7"}},
		{"10-1-2.default.pod.cluster.local.", nil},
		// More than fit in Go's 1232-byte EDNS(0) UDP answer: truncated,
		// then asked again over TCP by the resolver.
		{"big.default.svc.cluster.local.", bigAddrs},
	}
	for _, tc := range hosts {
		t.Run("host "+tc.name, func(t *testing.T) {
			got, err := r.LookupHost(ctx, tc.name)
			if tc.want == nil {
				var de *net.DNSError
				if !errors.As(err, &de) || !de.IsNotFound {
					t.Fatalf("LookupHost: %v, %v; want no such host", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("LookupHost (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("cname", func(t *testing.T) {
		got, err := r.LookupCNAME(ctx, "ext.default.svc.cluster.local.")
		if err != nil {
			t.Fatal(err)
		}
		if got != "example.com." {
			t.Errorf("LookupCNAME = %q, want example.com.", got)
		}
	})

	ptrs := []struct {
		addr string
		want []string // nil: refused
	}{
		{"10.96.0.10", []string{"web.default.svc.cluster.local."}},
		{"fd00::20", []string{"dual.default.svc.cluster.local."}},
		{"10.244.0.5", []string{"db-0.db.default.svc.cluster.local."}},
		{"fd00::5", []string{"db-0.db.default.svc.cluster.local."}},
		{"10.244.0.2", []string{"10-244-0-2.web.default.svc.cluster.local."}},
		{"10.244.0.7", nil}, // not ready
		{"192.0.2.1", nil},
	}
	for _, tc := range ptrs {
		t.Run("addr "+tc.addr, func(t *testing.T) {
			got, err := r.LookupAddr(ctx, tc.addr)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("LookupAddr = %v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("LookupAddr (-want +got):\n%s", diff)
			}
		})
	}

	srvs := []struct {
		service, proto, name string
		want                 []string // target:port
	}{
		{"pg", "tcp", "db.default.svc.cluster.local.", []string{"db-0.db.default.svc.cluster.local.:5432", "db-1.db.default.svc.cluster.local.:5432"}},
		{"http", "tcp", "web.default.svc.cluster.local.", []string{"web.default.svc.cluster.local.:80"}},
	}
	for _, tc := range srvs {
		t.Run("srv "+tc.service+"."+tc.name, func(t *testing.T) {
			_, recs, err := r.LookupSRV(ctx, tc.service, tc.proto, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, rec := range recs {
				got = append(got, fmt.Sprintf("%s:%d", rec.Target, rec.Port))
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("LookupSRV (-want +got):\n%s", diff)
			}
		})
	}
	for _, tc := range []struct{ service, proto, name string }{
		{"pg", "udp", "db.default.svc.cluster.local."},
		{"nope", "tcp", "web.default.svc.cluster.local."},
		{"http", "tcp", "ext.default.svc.cluster.local."},
	} {
		t.Run("no srv "+tc.service+"."+tc.proto+"."+tc.name, func(t *testing.T) {
			_, recs, err := r.LookupSRV(ctx, tc.service, tc.proto, tc.name)
			var de *net.DNSError
			if !errors.As(err, &de) || !de.IsNotFound {
				t.Fatalf("LookupSRV: %v, %v; want no such host", recs, err)
			}
		})
	}
}

// query is a raw query: its question, flags and EDNS(0) option.
type query struct {
	name      string
	qtype     dnsmessage.Type
	class     dnsmessage.Class // ClassINET when zero
	opcode    dnsmessage.OpCode
	questions int // how many times the question is repeated; 1 when zero
	edns      int // the EDNS(0) UDP size; no OPT record when zero
	ednsVer   uint32
}

func (q query) pack(t *testing.T, id uint16) []byte {
	t.Helper()
	class := q.class
	if class == 0 {
		class = dnsmessage.ClassINET
	}
	m := dnsmessage.Message{Header: dnsmessage.Header{ID: id, RecursionDesired: true, OpCode: q.opcode}}
	for range max(q.questions, 1) {
		m.Questions = append(m.Questions, dnsmessage.Question{Name: dnsmessage.MustNewName(q.name), Type: q.qtype, Class: class})
	}
	if q.edns > 0 {
		var h dnsmessage.ResourceHeader
		if err := h.SetEDNS0(q.edns, dnsmessage.RCodeSuccess, false); err != nil {
			t.Fatal(err)
		}
		h.TTL |= q.ednsVer << 16
		m.Additionals = append(m.Additionals, dnsmessage.Resource{Header: h, Body: &dnsmessage.OPTResource{}})
	}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// exchange sends msg to ts over network ("udp" or "tcp") and returns the
// answer's bytes.
func (ts *testServer) exchange(t *testing.T, network string, msg []byte) []byte {
	t.Helper()
	addr := ts.udp
	if network == "tcp" {
		addr = ts.tcp
	}
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(waitLimit)); err != nil {
		t.Fatal(err)
	}
	if network == "tcp" {
		return tcpExchange(t, c, msg)
	}
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// tcpExchange sends msg on a TCP connection and reads one answer.
func tcpExchange(t *testing.T, c net.Conn, msg []byte) []byte {
	t.Helper()
	out := binary.BigEndian.AppendUint16(nil, uint16(len(msg)))
	if _, err := c.Write(append(out, msg...)); err != nil {
		t.Fatal(err)
	}
	var n [2]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, binary.BigEndian.Uint16(n[:]))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	return buf
}

func unpack(t *testing.T, b []byte) dnsmessage.Message {
	t.Helper()
	var m dnsmessage.Message
	if err := m.Unpack(b); err != nil {
		t.Fatalf("unpacking the answer: %v", err)
	}
	return m
}

// summary is what the raw tests check of an answer.
type summary struct {
	RCode         dnsmessage.RCode // extended, with the OPT record's bits
	Authoritative bool
	Truncated     bool
	Answers       []string // "type value", in order
	Authorities   []string // types
	OPT           bool
}

func summarize(m dnsmessage.Message) summary {
	s := summary{RCode: m.Header.RCode, Authoritative: m.Header.Authoritative, Truncated: m.Header.Truncated}
	for _, r := range m.Answers {
		s.Answers = append(s.Answers, r.Header.Type.String()+" "+rdata(r))
	}
	for _, r := range m.Authorities {
		s.Authorities = append(s.Authorities, r.Header.Type.String())
	}
	for _, r := range m.Additionals {
		if r.Header.Type == dnsmessage.TypeOPT {
			s.OPT = true
			s.RCode = r.Header.ExtendedRCode(m.Header.RCode)
		}
	}
	return s
}

func rdata(r dnsmessage.Resource) string {
	switch b := r.Body.(type) {
	case *dnsmessage.AResource:
		return net.IP(b.A[:]).String()
	case *dnsmessage.AAAAResource:
		return net.IP(b.AAAA[:]).String()
	case *dnsmessage.CNAMEResource:
		return b.CNAME.String()
	case *dnsmessage.SOAResource:
		return fmt.Sprintf("%s %s %d", b.NS, b.MBox, b.MinTTL)
	case *dnsmessage.PTRResource:
		return b.PTR.String()
	case *dnsmessage.TXTResource:
		return fmt.Sprint(b.TXT)
	case *dnsmessage.SRVResource:
		return fmt.Sprintf("%s:%d", b.Target, b.Port)
	}
	return fmt.Sprintf("%T", r.Body)
}

func TestRawQueries(t *testing.T) {
	ts := start(t, Config{}, fake.NewClientset(fixtures()...), false)
	many := make([]string, 60)
	for i, e := range manyEndpoints(60) {
		many[i] = "TypeA " + e.addr
	}
	nodata := summary{RCode: dnsmessage.RCodeSuccess, Authoritative: true, Authorities: []string{"TypeSOA"}}
	nxdomain := summary{RCode: dnsmessage.RCodeNameError, Authoritative: true, Authorities: []string{"TypeSOA"}}
	tests := []struct {
		name    string
		network string // udp when empty
		q       query
		want    summary
	}{
		{"A", "", query{name: "web.default.svc.cluster.local.", qtype: dnsmessage.TypeA},
			summary{Authoritative: true, Answers: []string{"TypeA 10.96.0.10"}}},
		{"A over TCP", "tcp", query{name: "web.default.svc.cluster.local.", qtype: dnsmessage.TypeA},
			summary{Authoritative: true, Answers: []string{"TypeA 10.96.0.10"}}},
		{"AAAA of an IPv4-only name is NODATA", "", query{name: "web.default.svc.cluster.local.", qtype: dnsmessage.TypeAAAA}, nodata},
		{"AAAA of a dual-stack Service", "", query{name: "dual.default.svc.cluster.local.", qtype: dnsmessage.TypeAAAA},
			summary{Authoritative: true, Answers: []string{"TypeAAAA fd00::20"}}},
		{"ANY", "", query{name: "dual.default.svc.cluster.local.", qtype: dnsmessage.TypeALL},
			summary{Authoritative: true, Answers: []string{"TypeA 10.96.0.20", "TypeAAAA fd00::20"}}},
		{"TXT of a Service is NODATA", "", query{name: "web.default.svc.cluster.local.", qtype: dnsmessage.TypeTXT}, nodata},
		{"AAAA of a headless Service's IPv4-only endpoint", "", query{name: "db-1.db.default.svc.cluster.local.", qtype: dnsmessage.TypeAAAA}, nodata},
		{"missing Service", "", query{name: "nope.default.svc.cluster.local.", qtype: dnsmessage.TypeA}, nxdomain},
		{"AAAA of a missing Service", "", query{name: "nope.default.svc.cluster.local.", qtype: dnsmessage.TypeAAAA}, nxdomain},
		{"too many labels", "", query{name: "a.b.c.web.default.svc.cluster.local.", qtype: dnsmessage.TypeA}, nxdomain},
		{"not svc or pod", "", query{name: "web.default.foo.cluster.local.", qtype: dnsmessage.TypeA}, nxdomain},
		{"svc is an empty non-terminal", "", query{name: "svc.cluster.local.", qtype: dnsmessage.TypeA}, nodata},
		{"namespace with Services", "", query{name: "default.svc.cluster.local.", qtype: dnsmessage.TypeA}, nodata},
		{"namespace without Services", "", query{name: "nons.svc.cluster.local.", qtype: dnsmessage.TypeA}, nxdomain},
		{"SOA of the domain", "", query{name: "cluster.local.", qtype: dnsmessage.TypeSOA},
			summary{Authoritative: true, Answers: []string{"TypeSOA ns.dns.cluster.local. hostmaster.cluster.local. 5"}}},
		{"schema version", "", query{name: "dns-version.cluster.local.", qtype: dnsmessage.TypeTXT},
			summary{Authoritative: true, Answers: []string{"TypeTXT [1.1.0]"}}},
		{"A of the schema version is NODATA", "", query{name: "dns-version.cluster.local.", qtype: dnsmessage.TypeA}, nodata},
		{"CNAME of an ExternalName", "", query{name: "ext.default.svc.cluster.local.", qtype: dnsmessage.TypeCNAME},
			summary{Authoritative: true, Answers: []string{"TypeCNAME example.com."}}},
		{"A of an ExternalName outside the domain", "", query{name: "ext.default.svc.cluster.local.", qtype: dnsmessage.TypeA},
			summary{Authoritative: true, Answers: []string{"TypeCNAME example.com."}}},
		{"A of an ExternalName inside the domain", "", query{name: "alias.default.svc.cluster.local.", qtype: dnsmessage.TypeA},
			summary{Authoritative: true, Answers: []string{"TypeCNAME web.default.svc.cluster.local.", "TypeA 10.96.0.10"}}},
		{"ExternalName naming itself stops", "", query{name: "loop.default.svc.cluster.local.", qtype: dnsmessage.TypeA},
			summary{Authoritative: true, Answers: slices.Repeat([]string{"TypeCNAME loop.default.svc.cluster.local."}, maxCNAMEChain+1)}},
		{"PTR of a cluster IP", "", query{name: "10.0.96.10.in-addr.arpa.", qtype: dnsmessage.TypePTR},
			summary{Authoritative: true, Answers: []string{"TypePTR web.default.svc.cluster.local."}}},
		{"A of a cluster IP's reverse name is NODATA", "", query{name: "10.0.96.10.in-addr.arpa.", qtype: dnsmessage.TypeA},
			summary{Authoritative: true}},
		{"PTR of an address the cluster does not have is refused", "", query{name: "1.2.0.192.in-addr.arpa.", qtype: dnsmessage.TypePTR},
			summary{RCode: dnsmessage.RCodeRefused}},
		{"a partial reverse name is refused", "", query{name: "96.10.in-addr.arpa.", qtype: dnsmessage.TypePTR},
			summary{RCode: dnsmessage.RCodeRefused}},
		{"a reverse name with a leading zero is refused", "", query{name: "010.0.96.10.in-addr.arpa.", qtype: dnsmessage.TypePTR},
			summary{RCode: dnsmessage.RCodeRefused}},
		{"outside the domain is refused", "", query{name: "example.com.", qtype: dnsmessage.TypeA},
			summary{RCode: dnsmessage.RCodeRefused}},
		{"a suffix of the domain is refused", "", query{name: "local.", qtype: dnsmessage.TypeA},
			summary{RCode: dnsmessage.RCodeRefused}},
		{"a longer label ending like the domain is refused", "", query{name: "xcluster.local.", qtype: dnsmessage.TypeA},
			summary{RCode: dnsmessage.RCodeRefused}},
		{"two questions", "", query{name: "web.default.svc.cluster.local.", qtype: dnsmessage.TypeA, questions: 2},
			summary{RCode: dnsmessage.RCodeFormatError}},
		{"CHAOS class", "", query{name: "version.bind.", qtype: dnsmessage.TypeTXT, class: dnsmessage.Class(3)},
			summary{RCode: dnsmessage.RCodeNotImplemented}},
		{"STATUS opcode", "", query{name: "cluster.local.", qtype: dnsmessage.TypeA, opcode: 2},
			summary{RCode: dnsmessage.RCodeNotImplemented}},
		{"zone transfer", "tcp", query{name: "cluster.local.", qtype: dnsmessage.TypeAXFR},
			summary{RCode: dnsmessage.RCodeNotImplemented}},
		{"EDNS(0) is answered with OPT", "", query{name: "web.default.svc.cluster.local.", qtype: dnsmessage.TypeA, edns: 4096},
			summary{Authoritative: true, Answers: []string{"TypeA 10.96.0.10"}, OPT: true}},
		{"EDNS version 1", "", query{name: "web.default.svc.cluster.local.", qtype: dnsmessage.TypeA, edns: 4096, ednsVer: 1},
			summary{RCode: rcodeBadVers, OPT: true}},
		{"over 512 bytes on UDP is truncated", "", query{name: "many.default.svc.cluster.local.", qtype: dnsmessage.TypeA},
			summary{Authoritative: true, Truncated: true}},
		{"over 512 bytes within the EDNS(0) size", "", query{name: "many.default.svc.cluster.local.", qtype: dnsmessage.TypeA, edns: 1232},
			summary{Authoritative: true, Answers: many, OPT: true}},
		{"beyond the EDNS(0) size is truncated", "", query{name: "big.default.svc.cluster.local.", qtype: dnsmessage.TypeA, edns: 1232},
			summary{Authoritative: true, Truncated: true, OPT: true}},
		{"over 512 bytes on TCP", "tcp", query{name: "many.default.svc.cluster.local.", qtype: dnsmessage.TypeA}, summary{Authoritative: true, Answers: many}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			network := tc.network
			if network == "" {
				network = "udp"
			}
			id := uint16(1000 + i)
			m := unpack(t, ts.exchange(t, network, tc.q.pack(t, id)))
			if m.Header.ID != id || !m.Header.Response {
				t.Errorf("header: ID %d, response %v; want ID %d, response", m.Header.ID, m.Header.Response, id)
			}
			if diff := cmp.Diff(tc.want, summarize(m)); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
			if len(m.Questions) == 1 && m.Questions[0].Name.String() != tc.q.name {
				t.Errorf("question echoed as %s, want %s", m.Questions[0].Name, tc.q.name)
			}
		})
	}
}

// TestTCPBounded: an answer beyond the 64 KiB message keeps as many
// records as fit.
func TestTCPBounded(t *testing.T) {
	ts := start(t, Config{}, fake.NewClientset(fixtures()...), false)
	b := ts.exchange(t, "tcp", query{name: "huge.default.svc.cluster.local.", qtype: dnsmessage.TypeA}.pack(t, 7))
	m := unpack(t, b)
	if m.Header.RCode != dnsmessage.RCodeSuccess || len(m.Answers) < 4000 || len(m.Answers) >= 5000 || len(b) > 65535 {
		t.Errorf("answer: %v, %d answers in %d bytes; want success with 4000 to 4999 answers within 65535 bytes", m.Header.RCode, len(m.Answers), len(b))
	}
	// One more answer would not have fitted.
	if len(b)+16 <= 65535 {
		t.Errorf("answer of %d bytes left room for another record", len(b))
	}
}

// TestMalformed: what cannot be answered is dropped, and the server goes
// on answering.
func TestMalformed(t *testing.T) {
	ts := start(t, Config{}, fake.NewClientset(fixtures()...), false)
	good := query{name: "web.default.svc.cluster.local.", qtype: dnsmessage.TypeA}.pack(t, 42)
	asResponse := query{name: "web.default.svc.cluster.local.", qtype: dnsmessage.TypeA}.pack(t, 45)
	asResponse[2] |= 0x80 // QR
	truncatedQuestion := slices.Clone(good[:len(good)-3])
	truncatedQuestion[0], truncatedQuestion[1] = 0, 43
	for _, tc := range []struct {
		name   string
		msg    []byte
		answer *summary // nil: dropped
	}{
		{"empty", []byte{}, nil},
		{"shorter than a header", []byte{1, 2, 3, 4, 5}, nil},
		{"a response", asResponse, nil},
		{"a question cut short", truncatedQuestion, &summary{RCode: dnsmessage.RCodeFormatError}},
		{"no question", query{name: "x.", qtype: dnsmessage.TypeA}.pack(t, 44)[:12], &summary{RCode: dnsmessage.RCodeFormatError}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := slices.Clone(tc.msg)
			if tc.name == "no question" {
				msg[5] = 0 // QDCOUNT 0
			}
			c, err := net.Dial("udp", ts.udp)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.SetDeadline(time.Now().Add(waitLimit)); err != nil {
				t.Fatal(err)
			}
			// The bad message, then a good one: the first answer is the
			// bad message's when it has one, else the good one's.
			if _, err := c.Write(msg); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write(good); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 65535)
			n, err := c.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			m := unpack(t, buf[:n])
			if tc.answer == nil {
				if m.Header.ID != 42 {
					t.Fatalf("first answer has ID %d; want the good query's, 42", m.Header.ID)
				}
				return
			}
			if m.Header.ID == 42 {
				t.Fatal("the bad message got no answer")
			}
			if diff := cmp.Diff(*tc.answer, summarize(m)); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
	// A TCP message cut short ends its connection; the server goes on.
	c, err := net.Dial("tcp", ts.tcp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte{0, 200, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if m := unpack(t, ts.exchange(t, "tcp", good)); len(m.Answers) != 1 {
		t.Errorf("after a cut TCP message: %d answers, want 1", len(m.Answers))
	}
}

// TestNotSynced: until the informers have listed, queries in the domain
// get SERVFAIL (outside it, REFUSED as ever); then they are answered.
func TestNotSynced(t *testing.T) {
	client := fake.NewClientset(fixtures()...)
	release := make(chan struct{})
	client.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release
		return false, nil, nil
	})
	ts := start(t, Config{}, client, true)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	q := query{name: "web.default.svc.cluster.local.", qtype: dnsmessage.TypeA}
	if ts.srv.Ready() {
		t.Fatal("Ready before the Services were listed")
	}
	if got := summarize(unpack(t, ts.exchange(t, "udp", q.pack(t, 1)))); got.RCode != dnsmessage.RCodeServerFailure {
		t.Errorf("before sync: %+v, want SERVFAIL", got)
	}
	outside := query{name: "example.com.", qtype: dnsmessage.TypeA}
	if got := summarize(unpack(t, ts.exchange(t, "udp", outside.pack(t, 2)))); got.RCode != dnsmessage.RCodeRefused {
		t.Errorf("outside the domain before sync: %+v, want REFUSED", got)
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := ts.srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if got := summarize(unpack(t, ts.exchange(t, "udp", q.pack(t, 3)))); len(got.Answers) != 1 {
		t.Errorf("after sync: %+v, want the ClusterIP", got)
	}
}

// TestFollowsChanges: Services and EndpointSlices made, changed and
// removed while the server runs are answered once the informers see them.
func TestFollowsChanges(t *testing.T) {
	ts := start(t, Config{}, fake.NewClientset(fixtures()...), false)
	r := ts.resolver()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// eventually waits until LookupHost of name gives want (nil: no such
	// host).
	eventually := func(name string, want []string) {
		t.Helper()
		var got []string
		var err error
		werr := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got, err = r.LookupHost(ctx, name)
			slices.Sort(got)
			if want == nil {
				var de *net.DNSError
				return errors.As(err, &de) && de.IsNotFound, nil
			}
			return err == nil && slices.Equal(got, want), nil
		})
		if werr != nil {
			t.Fatalf("LookupHost %s: last %v, %v; want %v", name, got, err, want)
		}
	}

	const name = "late.default.svc.cluster.local."
	eventually(name, nil)
	svcs := ts.client.CoreV1().Services("default")
	if _, err := svcs.Create(ctx, clusterIPService("default", "late", []string{"10.96.0.99"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(name, []string{"10.96.0.99"})

	// Headless: its endpoints' addresses, as they become ready.
	if _, err := svcs.Create(ctx, headlessService("default", "hl"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slicesClient := ts.client.DiscoveryV1().EndpointSlices("default")
	s := endpointSlice("default", "hl", "hl-abc", discoveryv1.AddressTypeIPv4, nil, ep{addr: "10.244.1.1", host: "hl-0", ready: ptr.To(false)})
	if _, err := slicesClient.Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("hl.default.svc.cluster.local.", nil)
	s.Endpoints[0].Conditions.Ready = ptr.To(true)
	if _, err := slicesClient.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("hl.default.svc.cluster.local.", []string{"10.244.1.1"})
	eventually("hl-0.hl.default.svc.cluster.local.", []string{"10.244.1.1"})

	if err := svcs.Delete(ctx, "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(name, nil)
	if err := slicesClient.Delete(ctx, "hl-abc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("hl-0.hl.default.svc.cluster.local.", nil)
}

func TestTTLAndDomain(t *testing.T) {
	ts := start(t, Config{Domain: "Example.Test.", TTL: 30 * time.Second},
		fake.NewClientset(clusterIPService("default", "web", []string{"10.96.0.10"})), false)
	if got := ts.srv.Domain(); got != "example.test" {
		t.Errorf("Domain() = %q, want example.test", got)
	}
	m := unpack(t, ts.exchange(t, "udp", query{name: "web.default.svc.example.test.", qtype: dnsmessage.TypeA}.pack(t, 1)))
	if len(m.Answers) != 1 || m.Answers[0].Header.TTL != 30 {
		t.Errorf("answers %v; want one with TTL 30", m.Answers)
	}
	m = unpack(t, ts.exchange(t, "udp", query{name: "nope.default.svc.example.test.", qtype: dnsmessage.TypeA}.pack(t, 2)))
	if len(m.Authorities) != 1 || m.Authorities[0].Header.TTL != 30 || m.Authorities[0].Body.(*dnsmessage.SOAResource).MinTTL != 30 {
		t.Errorf("NXDOMAIN authorities %v; want the SOA with TTL and minimum 30", m.Authorities)
	}
	m = unpack(t, ts.exchange(t, "udp", query{name: "web.default.svc.cluster.local.", qtype: dnsmessage.TypeA}.pack(t, 3)))
	if m.Header.RCode != dnsmessage.RCodeRefused {
		t.Errorf("the default domain under another: %v, want REFUSED", m.Header.RCode)
	}
}

func TestTCPConnections(t *testing.T) {
	ts := start(t, Config{MaxTCPConns: 1, TCPIdleTimeout: time.Second},
		fake.NewClientset(fixtures()...), false)
	good := query{name: "web.default.svc.cluster.local.", qtype: dnsmessage.TypeA}.pack(t, 9)
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ts.tcp)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if err := c.SetDeadline(time.Now().Add(waitLimit)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Several queries on one connection.
	first := dial()
	for range 3 {
		if m := unpack(t, tcpExchange(t, first, good)); len(m.Answers) != 1 {
			t.Fatalf("answers %v, want 1", m.Answers)
		}
	}
	// A second connection is over MaxTCPConns: closed unanswered.
	second := dial()
	out := binary.BigEndian.AppendUint16(nil, uint16(len(good)))
	_, _ = second.Write(append(out, good...)) // may fail: the server may have closed it
	if n, err := second.Read(make([]byte, 1)); n != 0 || (!errors.Is(err, io.EOF) && !isReset(err)) {
		t.Errorf("reading a connection beyond MaxTCPConns: %d bytes, %v; want it closed unanswered", n, err)
	}
	// The first, idle, is closed by the server; then there is room again.
	if _, err := first.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Errorf("reading an idle connection: %v, want it closed", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// The connection answered once the idle one has gone stays open.
	var third net.Conn
	werr := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		c := dial()
		out := binary.BigEndian.AppendUint16(nil, uint16(len(good)))
		if _, err := c.Write(append(out, good...)); err != nil {
			return false, nil
		}
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return false, nil // closed: the idle one is not gone yet
		}
		if _, err := io.ReadFull(c, make([]byte, binary.BigEndian.Uint16(n[:]))); err != nil {
			return false, err
		}
		third = c
		return true, nil
	})
	if werr != nil {
		t.Fatalf("no room for a connection after the idle one closed: %v", werr)
	}

	if third == nil {
		t.Fatal("no connection answered")
	}
}

// TestStopClosesConnections: Serve closes the TCP connections it holds
// when its context ends, rather than waiting for their idle timeout.
func TestStopClosesConnections(t *testing.T) {
	ts := start(t, Config{TCPIdleTimeout: time.Hour}, fake.NewClientset(fixtures()...), false)
	c, err := net.Dial("tcp", ts.tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(waitLimit)); err != nil {
		t.Fatal(err)
	}
	good := query{name: "web.default.svc.cluster.local.", qtype: dnsmessage.TypeA}.pack(t, 9)
	if m := unpack(t, tcpExchange(t, c, good)); len(m.Answers) != 1 {
		t.Fatalf("answers %v, want 1", m.Answers)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- ts.stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Serve did not return with a TCP connection open")
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Errorf("reading a connection after Serve returned: %v, want it closed", err)
	}
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && strings.Contains(oe.Err.Error(), "connection reset")
}

func TestServeErrors(t *testing.T) {
	client := fake.NewClientset()
	srv, err := New(Config{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(context.Background(), nil, nil); err == nil {
		t.Error("Serve without sockets: no error")
	}

	// A socket closed under the server ends Serve with an error.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), pc, nil) }()
	wctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := srv.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	_ = pc.Close()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "reading UDP queries") {
			t.Errorf("Serve after its socket closed: %v, want a read error", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Serve did not return after its socket was closed")
	}

	pc2, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc2.Close()
	if err := srv.Serve(context.Background(), pc2, nil); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("second Serve: %v, want an error saying Serve runs once", err)
	}

	// WaitReady on a server that never served ends with its context.
	srv2, err := New(Config{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := srv2.WaitReady(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitReady of a cancelled context: %v, want context.Canceled", err)
	}
}

func TestNewConfig(t *testing.T) {
	client := fake.NewClientset()
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"no client", Config{}, "Client is required"},
		{"bad domain", Config{Client: client, Domain: "cluster_local"}, `Domain "cluster_local"`},
		{"empty label", Config{Client: client, Domain: "cluster..local"}, `Domain "cluster..local"`},
		{"fractional TTL", Config{Client: client, TTL: 1500 * time.Millisecond}, "TTL 1.5s"},
		{"negative TTL", Config{Client: client, TTL: -time.Second}, "TTL -1s"},
		{"negative MaxTCPConns", Config{Client: client, MaxTCPConns: -1}, "MaxTCPConns -1"},
		{"negative idle", Config{Client: client, TCPIdleTimeout: -time.Second}, "TCPIdleTimeout -1s"},
		{"defaults", Config{Client: client}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := New(tc.cfg)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if srv.domain != DefaultDomain || srv.ttl != 5 || srv.maxTCPConns != DefaultMaxTCPConns || srv.idleTimeout != DefaultTCPIdleTimeout {
					t.Errorf("defaults: %s %d %d %v", srv.domain, srv.ttl, srv.maxTCPConns, srv.idleTimeout)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
