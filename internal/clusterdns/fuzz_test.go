package clusterdns

import (
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"golang.org/x/net/dns/dnsmessage"
)

// FuzzAnswer: no message makes the handler panic, and every answer it
// gives is a DNS message answering the query's ID.
func FuzzAnswer(f *testing.F) {
	srv, err := New(Config{Client: fake.NewClientset()})
	if err != nil {
		f.Fatal(err)
	}
	close(srv.ready)
	services := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
		addrIndex:            serviceAddrKeys,
	})
	sliceIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		serviceIndex: endpointSliceServiceKey,
		addrIndex:    endpointSliceAddrKeys,
	})
	for _, obj := range fixtures() {
		var err error
		switch obj.(type) {
		case *corev1.Service:
			err = services.Add(obj)
		case *discoveryv1.EndpointSlice:
			err = sliceIdx.Add(obj)
		}
		if err != nil {
			f.Fatal(err)
		}
	}
	h := &handler{
		s:     srv,
		r:     &resolver{domain: srv.domain, ttl: srv.ttl, cat: &catalog{services: services, slices: sliceIdx}},
		conns: map[net.Conn]struct{}{},
	}
	for i, name := range []string{
		"web.default.svc.cluster.local.", "db.default.svc.cluster.local.", "db-0.db.default.svc.cluster.local.",
		"_pg._tcp.db.default.svc.cluster.local.", "alias.default.svc.cluster.local.", "loop.default.svc.cluster.local.",
		"10-1-2-3.default.pod.cluster.local.", "10.0.96.10.in-addr.arpa.", "cluster.local.", "example.com.",
	} {
		for _, qt := range []dnsmessage.Type{dnsmessage.TypeA, dnsmessage.TypeAAAA, dnsmessage.TypeSRV, dnsmessage.TypePTR, dnsmessage.TypeALL} {
			m := dnsmessage.Message{
				Header:    dnsmessage.Header{ID: uint16(i)},
				Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: qt, Class: dnsmessage.ClassINET}},
			}
			b, err := m.Pack()
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, false)
		}
	}
	f.Fuzz(func(t *testing.T, msg []byte, tcp bool) {
		resp := h.answer(msg, tcp)
		if resp == nil {
			return
		}
		var p dnsmessage.Parser
		hdr, err := p.Start(resp)
		if err != nil {
			t.Fatalf("answer %x to %x: %v", resp, msg, err)
		}
		if !hdr.Response || hdr.ID != uint16(msg[0])<<8|uint16(msg[1]) {
			t.Fatalf("answer header %+v to %x", hdr, msg)
		}
		var m dnsmessage.Message
		if err := m.Unpack(resp); err != nil {
			t.Fatalf("answer %x to %x: %v", resp, msg, err)
		}
		if limit := 65535; len(resp) > limit || (!tcp && len(resp) > ednsUDPSize) {
			t.Fatalf("answer of %d bytes (tcp %v)", len(resp), tcp)
		}
	})
}
