package clusterdns

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"golang.org/x/net/dns/dnsmessage"
)

// maxCNAMEChain bounds how many in-domain CNAMEs (ExternalName Services
// naming other Services) one answer follows.
const maxCNAMEChain = 8

// schemaVersion is the version of the Kubernetes DNS specification the
// records follow, answered as dns-version.<domain> TXT (its section 2.2),
// the one CoreDNS's kubernetes plugin answers.
const schemaVersion = "1.1.0"

// serviceIndex is the EndpointSlice informer's index of slices by the
// namespace/name of the Service they belong to.
const serviceIndex = "clusterdns-service"

// endpointSliceServiceKey indexes an EndpointSlice by its Service, from the
// kubernetes.io/service-name label the EndpointSlice controller sets.
func endpointSliceServiceKey(obj any) ([]string, error) {
	eps, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, fmt.Errorf("clusterdns: indexing %T: want *discoveryv1.EndpointSlice", obj)
	}
	name := eps.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return nil, nil
	}
	return []string{eps.Namespace + "/" + name}, nil
}

// catalog is what answers are made from: the informers' caches.
type catalog struct {
	services cache.Indexer
	slices   cache.Indexer
}

// service returns the Service ns/name, or nil.
func (c *catalog) service(ns, name string) (*corev1.Service, error) {
	obj, ok, err := c.services.GetByKey(ns + "/" + name)
	if err != nil {
		return nil, fmt.Errorf("clusterdns: reading Service %s/%s from the cache: %w", ns, name, err)
	}
	if !ok {
		return nil, nil
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, fmt.Errorf("clusterdns: cache holds %T for Service %s/%s", obj, ns, name)
	}
	return svc, nil
}

// hasNamespace reports whether any Service is in namespace ns.
func (c *catalog) hasNamespace(ns string) (bool, error) {
	keys, err := c.services.IndexKeys(cache.NamespaceIndex, ns)
	if err != nil {
		return false, fmt.Errorf("clusterdns: listing Services of namespace %s: %w", ns, err)
	}
	return len(keys) > 0, nil
}

// endpoint is one ready endpoint address of a Service.
type endpoint struct {
	addr     netip.Addr
	hostname string // the endpoint's hostname, or "" when it has none
}

// label is the endpoint's name under its Service: its hostname, else its
// address with dashes.
func (e endpoint) label() string {
	if e.hostname != "" {
		return strings.ToLower(e.hostname)
	}
	return dashed(e.addr)
}

// dashed writes an address as one DNS label: 10-244-0-5, fd00--1.
func dashed(a netip.Addr) string {
	return strings.NewReplacer(".", "-", ":", "-").Replace(a.String())
}

// undashed reads a label written by dashed.
func undashed(label string) (netip.Addr, bool) {
	if strings.Count(label, "-") == 3 {
		a, err := netip.ParseAddr(strings.ReplaceAll(label, "-", "."))
		return a, err == nil && a.Is4()
	}
	a, err := netip.ParseAddr(strings.ReplaceAll(label, "-", ":"))
	return a, err == nil && a.Is6() && !a.Is4In6() && a.Zone() == ""
}

// readyEndpoints returns the ready endpoints of Service ns/name across its
// EndpointSlices, each address once, in address order, with the ports the
// slices name (port name to number; the first slice naming a port wins).
func (c *catalog) readyEndpoints(ns, name string) ([]endpoint, map[string]slicePort, error) {
	objs, err := c.slices.ByIndex(serviceIndex, ns+"/"+name)
	if err != nil {
		return nil, nil, fmt.Errorf("clusterdns: listing EndpointSlices of Service %s/%s: %w", ns, name, err)
	}
	seen := map[netip.Addr]bool{}
	var eps []endpoint
	ports := map[string]slicePort{}
	for _, obj := range objs {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return nil, nil, fmt.Errorf("clusterdns: cache holds %T among EndpointSlices of %s/%s", obj, ns, name)
		}
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue // FQDN slices are deprecated and name no address
		}
		for _, p := range s.Ports {
			if p.Name == nil || p.Port == nil || *p.Name == "" {
				continue
			}
			if _, ok := ports[*p.Name]; ok {
				continue
			}
			proto := corev1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			ports[*p.Name] = slicePort{port: *p.Port, protocol: proto}
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue // nil means ready (the API's documented default)
			}
			host := ""
			if e.Hostname != nil {
				host = *e.Hostname
			}
			for _, a := range e.Addresses {
				addr, err := netip.ParseAddr(a)
				if err != nil || addr.Zone() != "" || seen[addr.Unmap()] {
					continue // the API validates addresses; a bad one names nothing
				}
				addr = addr.Unmap()
				seen[addr] = true
				eps = append(eps, endpoint{addr: addr, hostname: host})
			}
		}
	}
	slices.SortFunc(eps, func(a, b endpoint) int { return a.addr.Compare(b.addr) })
	return eps, ports, nil
}

// slicePort is a named port of an EndpointSlice.
type slicePort struct {
	port     int32
	protocol corev1.Protocol
}

// answer is what a question resolves to, before it is encoded.
type answer struct {
	rcode       dnsmessage.RCode
	answers     []dnsmessage.Resource
	additionals []dnsmessage.Resource
	// soa asks for the zone's SOA in the authority section (NXDOMAIN and
	// NODATA answers, for negative caching).
	soa bool
}

// resolver answers questions under one domain from a catalog.
type resolver struct {
	domain string // lower case, no trailing dot: "cluster.local"
	ttl    uint32
	cat    *catalog
}

// inDomain returns the labels of the lower-cased fully qualified name
// before the domain, and whether name is the domain or under it.
func (r *resolver) inDomain(name string) ([]string, bool) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if name == r.domain {
		return nil, true
	}
	rel, ok := strings.CutSuffix(name, "."+r.domain)
	if !ok || rel == "" {
		return nil, false
	}
	return strings.Split(rel, "."), true
}

// resolve answers q, whose name is under the domain (labels are its labels
// before the domain); it returns an error only for a failure of its own
// (SERVFAIL).
func (r *resolver) resolve(q dnsmessage.Question, labels []string) (answer, error) {
	return r.resolveDepth(q.Name, q.Type, labels, 0)
}

func (r *resolver) resolveDepth(owner dnsmessage.Name, qtype dnsmessage.Type, labels []string, depth int) (answer, error) {
	nodata := answer{rcode: dnsmessage.RCodeSuccess, soa: true}
	nxdomain := answer{rcode: dnsmessage.RCodeNameError, soa: true}
	n := len(labels)
	switch {
	case n == 0: // the domain itself
		if qtype == dnsmessage.TypeSOA || qtype == dnsmessage.TypeALL {
			soa, err := r.soa()
			if err != nil {
				return answer{}, err
			}
			soa.Header.Name = owner
			return answer{answers: []dnsmessage.Resource{soa}}, nil
		}
		return nodata, nil
	case n == 1 && labels[0] == "dns-version":
		if qtype == dnsmessage.TypeTXT || qtype == dnsmessage.TypeALL {
			return answer{answers: []dnsmessage.Resource{{
				Header: r.header(owner, dnsmessage.TypeTXT),
				Body:   &dnsmessage.TXTResource{TXT: []string{schemaVersion}},
			}}}, nil
		}
		return nodata, nil
	case labels[n-1] == "svc":
		return r.resolveSvc(owner, qtype, labels[:n-1], depth)
	case labels[n-1] == "pod":
		switch n {
		case 1, 2: // pod.<domain>, <ns>.pod.<domain>: empty non-terminals
			return nodata, nil
		case 3:
			addr, ok := undashed(labels[0])
			if !ok {
				return nxdomain, nil
			}
			return answer{answers: r.addrRecords(owner, qtype, []netip.Addr{addr})}.orNodata(), nil
		}
	}
	return nxdomain, nil
}

// orNodata marks an answer without records as NODATA.
func (a answer) orNodata() answer {
	if len(a.answers) == 0 {
		a.soa = true
	}
	return a
}

// resolveSvc answers names under svc.<domain>; labels are those before it.
func (r *resolver) resolveSvc(owner dnsmessage.Name, qtype dnsmessage.Type, labels []string, depth int) (answer, error) {
	nodata := answer{rcode: dnsmessage.RCodeSuccess, soa: true}
	nxdomain := answer{rcode: dnsmessage.RCodeNameError, soa: true}
	switch len(labels) {
	case 0: // svc.<domain>
		return nodata, nil
	case 1: // <ns>.svc.<domain>
		ok, err := r.cat.hasNamespace(labels[0])
		if err != nil {
			return answer{}, err
		}
		if !ok {
			return nxdomain, nil
		}
		return nodata, nil
	case 2: // <svc>.<ns>.svc.<domain>
		return r.resolveService(owner, qtype, labels[1], labels[0], depth)
	case 3: // <endpoint>.<svc>.<ns>.svc.<domain>
		return r.resolveEndpoint(owner, qtype, labels[2], labels[1], labels[0])
	case 4: // _<port>._<proto>.<svc>.<ns>.svc.<domain>
		return r.resolveSRV(owner, qtype, labels[3], labels[2], labels[0], labels[1])
	}
	return nxdomain, nil
}

func (r *resolver) resolveService(owner dnsmessage.Name, qtype dnsmessage.Type, ns, name string, depth int) (answer, error) {
	svc, err := r.cat.service(ns, name)
	if err != nil {
		return answer{}, err
	}
	if svc == nil {
		return answer{rcode: dnsmessage.RCodeNameError, soa: true}, nil
	}
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return r.resolveExternalName(owner, qtype, svc, depth)
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		eps, _, err := r.cat.readyEndpoints(ns, name)
		if err != nil {
			return answer{}, err
		}
		if len(eps) == 0 {
			// The specification: a headless Service without ready
			// endpoints has no records; CoreDNS answers NXDOMAIN.
			return answer{rcode: dnsmessage.RCodeNameError, soa: true}, nil
		}
		addrs := make([]netip.Addr, len(eps))
		for i, e := range eps {
			addrs[i] = e.addr
		}
		return answer{answers: r.addrRecords(owner, qtype, addrs)}.orNodata(), nil
	default:
		return answer{answers: r.addrRecords(owner, qtype, clusterIPs(svc))}.orNodata(), nil
	}
}

// clusterIPs returns a Service's cluster IPs, each family's.
func clusterIPs(svc *corev1.Service) []netip.Addr {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	var addrs []netip.Addr
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil && a.Zone() == "" {
			addrs = append(addrs, a.Unmap())
		}
	}
	return addrs
}

func (r *resolver) resolveExternalName(owner dnsmessage.Name, qtype dnsmessage.Type, svc *corev1.Service, depth int) (answer, error) {
	target := strings.ToLower(strings.TrimSuffix(svc.Spec.ExternalName, "."))
	if target == "" {
		return answer{soa: true}, nil
	}
	tname, err := dnsmessage.NewName(target + ".")
	if err != nil {
		return answer{}, fmt.Errorf("clusterdns: ExternalName %q of Service %s/%s: %w", svc.Spec.ExternalName, svc.Namespace, svc.Name, err)
	}
	cname := dnsmessage.Resource{
		Header: r.header(owner, dnsmessage.TypeCNAME),
		Body:   &dnsmessage.CNAMEResource{CNAME: tname},
	}
	a := answer{answers: []dnsmessage.Resource{cname}}
	if qtype == dnsmessage.TypeCNAME {
		return a, nil
	}
	labels, ok := r.inDomain(target)
	if !ok || depth >= maxCNAMEChain {
		// Outside the domain: the resolver asks for the target itself
		// (and is refused here; the test cluster resolves no outside names).
		return a, nil
	}
	next, err := r.resolveDepth(tname, qtype, labels, depth+1)
	if err != nil {
		return answer{}, err
	}
	// The answer's rcode is the chain's end's (RFC 6604), its records the
	// CNAME followed by the target's.
	next.answers = append([]dnsmessage.Resource{cname}, next.answers...)
	return next, nil
}

func (r *resolver) resolveEndpoint(owner dnsmessage.Name, qtype dnsmessage.Type, ns, name, label string) (answer, error) {
	svc, err := r.cat.service(ns, name)
	if err != nil {
		return answer{}, err
	}
	nxdomain := answer{rcode: dnsmessage.RCodeNameError, soa: true}
	if svc == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nxdomain, nil
	}
	eps, _, err := r.cat.readyEndpoints(ns, name)
	if err != nil {
		return answer{}, err
	}
	var addrs []netip.Addr
	for _, e := range eps {
		if e.label() == label {
			addrs = append(addrs, e.addr)
		}
	}
	if len(addrs) == 0 {
		return nxdomain, nil
	}
	return answer{answers: r.addrRecords(owner, qtype, addrs)}.orNodata(), nil
}

func (r *resolver) resolveSRV(owner dnsmessage.Name, qtype dnsmessage.Type, ns, name, portLabel, protoLabel string) (answer, error) {
	nxdomain := answer{rcode: dnsmessage.RCodeNameError, soa: true}
	portName, ok1 := strings.CutPrefix(portLabel, "_")
	proto, ok2 := strings.CutPrefix(protoLabel, "_")
	if !ok1 || !ok2 || portName == "" || proto == "" {
		return nxdomain, nil
	}
	svc, err := r.cat.service(ns, name)
	if err != nil {
		return answer{}, err
	}
	if svc == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nxdomain, nil
	}
	svcName := name + "." + ns + ".svc." + r.domain + "."
	var a answer
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		eps, ports, err := r.cat.readyEndpoints(ns, name)
		if err != nil {
			return answer{}, err
		}
		p, ok := ports[portName]
		if !ok || !strings.EqualFold(string(p.protocol), proto) {
			return nxdomain, nil
		}
		// One target per endpoint name, with all its addresses (an
		// endpoint in an IPv4 and an IPv6 slice is one target).
		var labels []string
		addrs := map[string][]netip.Addr{}
		for _, e := range eps {
			l := e.label()
			if _, ok := addrs[l]; !ok {
				labels = append(labels, l)
			}
			addrs[l] = append(addrs[l], e.addr)
		}
		for _, l := range labels {
			if err := r.addSRV(&a, owner, qtype, l+"."+svcName, p.port, addrs[l]); err != nil {
				return answer{}, err
			}
		}
		if len(eps) == 0 {
			return nxdomain, nil
		}
		return a.orNodata(), nil
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == portName && strings.EqualFold(string(p.Protocol), proto) {
			if err := r.addSRV(&a, owner, qtype, svcName, p.Port, clusterIPs(svc)); err != nil {
				return answer{}, err
			}
			return a.orNodata(), nil
		}
	}
	return nxdomain, nil
}

// addSRV adds an SRV record to target:port (and the target's addresses to
// the additional section) when the question asks for SRV.
func (r *resolver) addSRV(a *answer, owner dnsmessage.Name, qtype dnsmessage.Type, target string, port int32, addrs []netip.Addr) error {
	if qtype != dnsmessage.TypeSRV && qtype != dnsmessage.TypeALL {
		return nil
	}
	tname, err := dnsmessage.NewName(target)
	if err != nil {
		return fmt.Errorf("clusterdns: SRV target %q: %w", target, err)
	}
	a.answers = append(a.answers, dnsmessage.Resource{
		Header: r.header(owner, dnsmessage.TypeSRV),
		// Weight 100 and priority 0 for every target, as CoreDNS shares
		// them out evenly.
		Body: &dnsmessage.SRVResource{Priority: 0, Weight: 100, Port: uint16(port), Target: tname},
	})
	a.additionals = append(a.additionals, r.addrRecords(tname, dnsmessage.TypeALL, addrs)...)
	return nil
}

// addrRecords returns A and AAAA records of owner for those of addrs the
// question type asks for.
func (r *resolver) addrRecords(owner dnsmessage.Name, qtype dnsmessage.Type, addrs []netip.Addr) []dnsmessage.Resource {
	var rs []dnsmessage.Resource
	for _, a := range addrs {
		switch {
		case a.Is4() && (qtype == dnsmessage.TypeA || qtype == dnsmessage.TypeALL):
			rs = append(rs, dnsmessage.Resource{Header: r.header(owner, dnsmessage.TypeA), Body: &dnsmessage.AResource{A: a.As4()}})
		case a.Is6() && (qtype == dnsmessage.TypeAAAA || qtype == dnsmessage.TypeALL):
			rs = append(rs, dnsmessage.Resource{Header: r.header(owner, dnsmessage.TypeAAAA), Body: &dnsmessage.AAAAResource{AAAA: a.As16()}})
		}
	}
	return rs
}

func (r *resolver) header(owner dnsmessage.Name, t dnsmessage.Type) dnsmessage.ResourceHeader {
	return dnsmessage.ResourceHeader{Name: owner, Type: t, Class: dnsmessage.ClassINET, TTL: r.ttl}
}

// soa returns the zone's SOA record, as CoreDNS's kubernetes plugin makes
// it; its minimum (the negative-caching TTL) is the TTL. The serial is
// fixed: nothing transfers the zone.
func (r *resolver) soa() (dnsmessage.Resource, error) {
	zone, err := dnsmessage.NewName(r.domain + ".")
	if err != nil {
		return dnsmessage.Resource{}, fmt.Errorf("clusterdns: zone name: %w", err)
	}
	ns, err := dnsmessage.NewName("ns.dns." + r.domain + ".")
	if err != nil {
		return dnsmessage.Resource{}, fmt.Errorf("clusterdns: SOA name server: %w", err)
	}
	mbox, err := dnsmessage.NewName("hostmaster." + r.domain + ".")
	if err != nil {
		return dnsmessage.Resource{}, fmt.Errorf("clusterdns: SOA mailbox: %w", err)
	}
	return dnsmessage.Resource{
		Header: r.header(zone, dnsmessage.TypeSOA),
		Body: &dnsmessage.SOAResource{
			NS: ns, MBox: mbox, Serial: 1,
			Refresh: 7200, Retry: 1800, Expire: 86400, MinTTL: r.ttl,
		},
	}, nil
}

// addrIndex is the Service informer's index of Services by cluster IP,
// and the EndpointSlice informer's of slices by endpoint address, for
// reverse (PTR) answers.
const addrIndex = "clusterdns-addr"

// serviceAddrKeys indexes a Service by its cluster IPs.
func serviceAddrKeys(obj any) ([]string, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, fmt.Errorf("clusterdns: indexing %T: want *corev1.Service", obj)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil, nil
	}
	var keys []string
	for _, a := range clusterIPs(svc) {
		keys = append(keys, a.String())
	}
	return keys, nil
}

// endpointSliceAddrKeys indexes an EndpointSlice by its endpoints'
// addresses.
func endpointSliceAddrKeys(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, fmt.Errorf("clusterdns: indexing %T: want *discoveryv1.EndpointSlice", obj)
	}
	var keys []string
	for _, e := range s.Endpoints {
		for _, a := range e.Addresses {
			if addr, err := netip.ParseAddr(a); err == nil && addr.Zone() == "" {
				keys = append(keys, addr.Unmap().String())
			}
		}
	}
	return keys, nil
}

// reverseAddr reads a reverse-lookup name (4.3.2.1.in-addr.arpa, or 32
// nibbles under ip6.arpa), lower case without the trailing dot.
func reverseAddr(name string) (netip.Addr, bool) {
	if rel, ok := strings.CutSuffix(name, ".in-addr.arpa"); ok {
		labels := strings.Split(rel, ".")
		if len(labels) != 4 {
			return netip.Addr{}, false
		}
		var b [4]byte
		for i, l := range labels {
			v, err := strconv.ParseUint(l, 10, 8)
			if err != nil || (len(l) > 1 && l[0] == '0') {
				return netip.Addr{}, false
			}
			b[3-i] = byte(v)
		}
		return netip.AddrFrom4(b), true
	}
	if rel, ok := strings.CutSuffix(name, ".ip6.arpa"); ok {
		labels := strings.Split(rel, ".")
		if len(labels) != 32 {
			return netip.Addr{}, false
		}
		var b [16]byte
		for i, l := range labels {
			v, err := strconv.ParseUint(l, 16, 4)
			if err != nil || len(l) != 1 {
				return netip.Addr{}, false
			}
			n := 31 - i // nibble index from the address's start
			b[n/2] |= byte(v) << (4 * (1 - n%2))
		}
		return netip.AddrFrom16(b), true
	}
	return netip.Addr{}, false
}

// resolvePTR answers a reverse lookup of addr: the names of the Services
// whose cluster IP it is, then of the ready endpoints that have it (as
// <endpoint>.<svc>.<ns>.svc.<domain>). found is false when no Service or
// endpoint has addr: the address is not the cluster's to name.
func (r *resolver) resolvePTR(owner dnsmessage.Name, qtype dnsmessage.Type, addr netip.Addr) (a answer, found bool, err error) {
	var names []string
	svcs, err := r.cat.services.ByIndex(addrIndex, addr.String())
	if err != nil {
		return answer{}, false, fmt.Errorf("clusterdns: looking up Services of cluster IP %s: %w", addr, err)
	}
	for _, obj := range svcs {
		if svc, ok := obj.(*corev1.Service); ok {
			names = append(names, strings.ToLower(svc.Name+"."+svc.Namespace+".svc."+r.domain+"."))
		}
	}
	eps, err := r.cat.slices.ByIndex(addrIndex, addr.String())
	if err != nil {
		return answer{}, false, fmt.Errorf("clusterdns: looking up EndpointSlices of address %s: %w", addr, err)
	}
	for _, obj := range eps {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok || s.Labels[discoveryv1.LabelServiceName] == "" {
			continue
		}
		svcName := s.Labels[discoveryv1.LabelServiceName] + "." + s.Namespace + ".svc." + r.domain + "."
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, raw := range e.Addresses {
				if ea, err := netip.ParseAddr(raw); err == nil && ea.Unmap() == addr {
					names = append(names, strings.ToLower(endpoint{addr: addr, hostname: ptrOr(e.Hostname)}.label()+"."+svcName))
				}
			}
		}
	}
	if len(names) == 0 {
		return answer{}, false, nil
	}
	slices.Sort(names[len(svcs):]) // Services first, then endpoints in order
	names = slices.Compact(names)
	if qtype != dnsmessage.TypePTR && qtype != dnsmessage.TypeALL {
		return answer{}, true, nil // NODATA (the SOA is the cluster domain's, not this zone's)
	}
	for _, n := range names {
		target, err := dnsmessage.NewName(n)
		if err != nil {
			return answer{}, false, fmt.Errorf("clusterdns: PTR target %q: %w", n, err)
		}
		a.answers = append(a.answers, dnsmessage.Resource{Header: r.header(owner, dnsmessage.TypePTR), Body: &dnsmessage.PTRResource{PTR: target}})
	}
	return a, true, nil
}

func ptrOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
