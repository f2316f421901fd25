// Package clusterdns is a minimal cluster DNS server: the stand-in for
// CoreDNS in the test cluster harness (internal/nodecluster, issue 30).
//
// Why not CoreDNS: there is no CoreDNS image on the test machines, and
// building CoreDNS from the module proxy drags in every cloud SDK its
// plugins import (route53, azure, clouddns, ...), minutes of compilation
// on a 2-core machine for the handful of names a test cluster's pods look
// up. This package answers those names as CoreDNS's kubernetes plugin does,
// following the Kubernetes DNS specification
// (https://github.com/kubernetes/dns/blob/master/docs/specification.md),
// from Services and discovery.k8s.io/v1 EndpointSlices read through
// client-go informers, with golang.org/x/net/dns/dnsmessage on the wire.
//
// What it answers, under the cluster domain (Config.Domain, "cluster.local"
// by default), with the TTL Config.TTL (5 s by default):
//
//   - <svc>.<ns>.svc.<domain>: A/AAAA of a ClusterIP Service's cluster IPs;
//     of a headless Service (clusterIP None), the addresses of the ready
//     endpoints of its EndpointSlices (NXDOMAIN when it has none, as the
//     specification says); of an ExternalName Service, a CNAME to its
//     external name (followed when the target is itself in the domain).
//   - <endpoint>.<svc>.<ns>.svc.<domain>: A/AAAA of a ready endpoint whose
//     hostname is <endpoint> (StatefulSet pods under a governing Service),
//     or whose address written with dashes is <endpoint> (10-244-0-5), as
//     CoreDNS does.
//   - _<port>._<proto>.<svc>.<ns>.svc.<domain>: SRV for a named port, with
//     the targets' addresses in the additional section.
//   - <a-b-c-d>.<ns>.pod.<domain>: A/AAAA of the address the first label
//     spells, without checking that a pod has it (CoreDNS's "pods insecure",
//     the mode kubeadm configures).
//   - dns-version.<domain>: TXT of the specification's schema version.
//   - reverse names (in-addr.arpa, ip6.arpa) of a Service's cluster IP or
//     a ready endpoint's address: PTR to the Service's or the endpoint's
//     name. A reverse name of an address no Service or endpoint has is
//     REFUSED, as a name outside the domain is: not the cluster's to name.
//   - the domain itself: its SOA.
//
// A name that exists but has no record of the asked type gets NOERROR with
// no answers (NODATA) and the SOA in the authority section: a name with
// only IPv4 addresses answers AAAA so, which resolvers (glibc, musl, Go)
// that ask A and AAAA together rely on. A name under the domain that does
// not exist gets NXDOMAIN with the SOA. Before the informers have synced,
// every query under the domain gets SERVFAIL, so a resolver retries rather
// than caches a wrong NXDOMAIN.
//
// The server listens on sockets its caller made (the harness makes them
// inside the cluster's network namespace): UDP, truncating answers beyond
// 512 bytes, or beyond the size the query's EDNS(0) option allows, with the
// TC bit set so the resolver asks again over TCP; and TCP, where answers
// are bounded by the 64 KiB message limit. Malformed queries get FORMERR,
// other opcodes and classes than QUERY and IN, and zone transfers, get
// NOTIMP; a query with the response bit set, or too short to hold a
// header, is dropped. Each query is answered from the informers' caches
// in the reading goroutine, so work per query is bounded by the records of
// one Service.
//
// What it does not do: names outside the domain are REFUSED, never
// forwarded (no traffic leaves the machine, and nothing in the test
// cluster needs outside names); no wildcards, no
// search-path expansion (autopath), no DNSSEC, no zone transfers, no
// caching beyond the informers, no metrics. A Service's records for named
// ports are only the _<port>._<proto> SRV form (not SRV on the bare
// Service name).
package clusterdns
