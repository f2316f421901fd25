package clusterdns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Defaults of Config's fields.
const (
	DefaultDomain         = "cluster.local"
	DefaultTTL            = 5 * time.Second
	DefaultMaxTCPConns    = 64
	DefaultTCPIdleTimeout = 10 * time.Second
)

const (
	// minUDPSize is the UDP answer size every resolver takes (RFC 1035).
	minUDPSize = 512
	// ednsUDPSize is the UDP size the server advertises and the most it
	// sends, the DNS flag day 2020 value that avoids IP fragmentation.
	ednsUDPSize = 1232
	// maxMessageSize is the largest DNS message (TCP's length prefix).
	maxMessageSize = 65535
	// rcodeBadVers is EDNS(0)'s BADVERS (RFC 6891), an extended rcode.
	rcodeBadVers dnsmessage.RCode = 16
)

// Query types dnsmessage has no name for, all of them NOTIMP here: zone
// transfers and the obsolete mailbox queries (RFC 1035 3.2.3, RFC 1995).
const (
	typeIXFR  dnsmessage.Type = 251
	typeMAILB dnsmessage.Type = 253
	typeMAILA dnsmessage.Type = 254
)

// Config configures a Server. The zero value of every field but Client
// takes its default.
type Config struct {
	// Client reads Services and EndpointSlices (list and watch, all
	// namespaces). Required.
	Client kubernetes.Interface
	// Domain is the cluster domain (kubelet's --cluster-domain), answered
	// as the zone; DefaultDomain when empty. A trailing dot is allowed;
	// upper case is folded.
	Domain string
	// TTL of every record and of negative answers (the SOA's minimum):
	// whole seconds, DefaultTTL when zero.
	TTL time.Duration
	// MaxTCPConns bounds the TCP connections served at once; a connection
	// beyond it is closed at once. DefaultMaxTCPConns when zero.
	MaxTCPConns int
	// TCPIdleTimeout closes a TCP connection that sends no complete query,
	// or does not read an answer, for that long (a socket deadline).
	// DefaultTCPIdleTimeout when zero.
	TCPIdleTimeout time.Duration
	// Logf logs the server's own events (informers synced, socket errors);
	// queries are not logged. Discarded when nil.
	Logf func(format string, args ...any)
}

// Server is a cluster DNS server; see the package comment for what it
// answers. Make it with New and run it with Serve, once.
type Server struct {
	client      kubernetes.Interface
	domain      string
	ttl         uint32
	maxTCPConns int
	idleTimeout time.Duration
	logf        func(format string, args ...any)

	served atomic.Bool
	ready  chan struct{} // closed when the informers have synced
}

// New checks cfg, fills in its defaults and returns a Server that has not
// started.
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil {
		return nil, errors.New("clusterdns: Config.Client is required")
	}
	domain := strings.ToLower(strings.TrimSuffix(cfg.Domain, "."))
	if domain == "" {
		domain = DefaultDomain
	}
	if errs := validation.IsDNS1123Subdomain(domain); len(errs) > 0 {
		return nil, fmt.Errorf("clusterdns: Config.Domain %q: %s", cfg.Domain, strings.Join(errs, "; "))
	}
	ttl := cfg.TTL
	switch {
	case ttl == 0:
		ttl = DefaultTTL
	case ttl < time.Second || ttl%time.Second != 0 || ttl > 24*time.Hour:
		return nil, fmt.Errorf("clusterdns: Config.TTL %v: want whole seconds from 1s to 24h", cfg.TTL)
	}
	maxConns := cfg.MaxTCPConns
	switch {
	case maxConns == 0:
		maxConns = DefaultMaxTCPConns
	case maxConns < 0:
		return nil, fmt.Errorf("clusterdns: Config.MaxTCPConns %d: want a positive number", cfg.MaxTCPConns)
	}
	idle := cfg.TCPIdleTimeout
	switch {
	case idle == 0:
		idle = DefaultTCPIdleTimeout
	case idle < 0:
		return nil, fmt.Errorf("clusterdns: Config.TCPIdleTimeout %v: want a positive duration", cfg.TCPIdleTimeout)
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Server{
		client:      cfg.Client,
		domain:      domain,
		ttl:         uint32(ttl / time.Second),
		maxTCPConns: maxConns,
		idleTimeout: idle,
		logf:        logf,
		ready:       make(chan struct{}),
	}, nil
}

// Domain returns the cluster domain the server answers, lower case and
// without a trailing dot.
func (s *Server) Domain() string { return s.domain }

// Ready reports whether the informers have synced, from when on queries
// under the domain are answered (before, they get SERVFAIL).
func (s *Server) Ready() bool {
	select {
	case <-s.ready:
		return true
	default:
		return false
	}
}

// WaitReady waits until Ready or until ctx ends, returning ctx's error then.
func (s *Server) WaitReady(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("clusterdns: waiting for the Service and EndpointSlice informers to sync: %w", context.Cause(ctx))
	}
}

// Serve answers queries arriving on pc (UDP) and l (TCP), either of which
// may be nil but not both, until ctx ends; it then closes pc, l and the
// TCP connections it holds, waits for every goroutine it started (the
// informers' too) and returns nil. It returns early with an error when a
// socket fails (pc or l closed by someone else, for instance), after the
// same cleanup. Serve runs once per Server.
func (s *Server) Serve(ctx context.Context, pc net.PacketConn, l net.Listener) error {
	if pc == nil && l == nil {
		return errors.New("clusterdns: Serve needs a packet connection, a listener or both")
	}
	if !s.served.CompareAndSwap(false, true) {
		return errors.New("clusterdns: Serve called twice on one Server")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	factory := informers.NewSharedInformerFactory(s.client, 0)
	svcInformer := factory.Core().V1().Services().Informer()
	sliceInformer := factory.Discovery().V1().EndpointSlices().Informer()
	if err := svcInformer.AddIndexers(cache.Indexers{addrIndex: serviceAddrKeys}); err != nil {
		closeAll(pc, l)
		return fmt.Errorf("clusterdns: indexing Services by cluster IP: %w", err)
	}
	if err := sliceInformer.AddIndexers(cache.Indexers{serviceIndex: endpointSliceServiceKey, addrIndex: endpointSliceAddrKeys}); err != nil {
		closeAll(pc, l)
		return fmt.Errorf("clusterdns: indexing EndpointSlices: %w", err)
	}
	h := &handler{
		s: s,
		r: &resolver{
			domain: s.domain,
			ttl:    s.ttl,
			cat:    &catalog{services: svcInformer.GetIndexer(), slices: sliceInformer.GetIndexer()},
		},
		conns: map[net.Conn]struct{}{},
	}
	factory.Start(ctx.Done())

	var wg sync.WaitGroup
	wg.Go(func() {
		if cache.WaitForCacheSync(ctx.Done(), svcInformer.HasSynced, sliceInformer.HasSynced) {
			close(s.ready)
			s.logf("clusterdns: Service and EndpointSlice informers synced; answering %s", s.domain)
		}
	})
	var (
		errMu sync.Mutex
		errs  []error
	)
	fail := func(err error) {
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
		cancel()
	}
	if pc != nil {
		wg.Go(func() {
			if err := h.serveUDP(ctx, pc); err != nil {
				fail(err)
			}
		})
	}
	if l != nil {
		wg.Go(func() {
			if err := h.serveTCP(ctx, l, &wg); err != nil {
				fail(err)
			}
		})
	}
	<-ctx.Done()
	closeAll(pc, l)
	h.closeConns()
	wg.Wait()
	factory.Shutdown()
	return errors.Join(errs...)
}

func closeAll(pc net.PacketConn, l net.Listener) {
	if pc != nil {
		_ = pc.Close() // Serve owns pc from its call; nothing to report at the end
	}
	if l != nil {
		_ = l.Close()
	}
}

// handler serves queries of one Serve.
type handler struct {
	s *Server
	r *resolver

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func (h *handler) serveUDP(ctx context.Context, pc net.PacketConn) error {
	buf := make([]byte, maxMessageSize)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("clusterdns: reading UDP queries on %s: %w", pc.LocalAddr(), err)
		}
		resp := h.answer(buf[:n], false)
		if resp == nil {
			continue
		}
		if _, err := pc.WriteTo(resp, addr); err != nil && ctx.Err() == nil {
			h.s.logf("clusterdns: answering %s over UDP: %v", addr, err)
		}
	}
}

func (h *handler) serveTCP(ctx context.Context, l net.Listener, wg *sync.WaitGroup) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("clusterdns: accepting TCP connections on %s: %w", l.Addr(), err)
		}
		if !h.track(c) {
			_ = c.Close() // over MaxTCPConns, or shutting down: refuse the connection
			continue
		}
		wg.Go(func() {
			defer h.untrack(c)
			h.serveConn(c)
		})
	}
}

// track registers c, unless the server holds MaxTCPConns or is shutting
// down.
func (h *handler) track(c net.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || len(h.conns) >= h.s.maxTCPConns {
		return false
	}
	h.conns[c] = struct{}{}
	return true
}

func (h *handler) untrack(c net.Conn) {
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
	_ = c.Close() // the client is gone or done; nothing to report
}

// closeConns closes every TCP connection, so their goroutines end.
func (h *handler) closeConns() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for c := range h.conns {
		_ = c.Close() // shutting down
	}
}

// serveConn answers the queries of one TCP connection, each a two-byte
// length then the message (RFC 1035 4.2.2), in order.
func (h *handler) serveConn(c net.Conn) {
	buf := make([]byte, maxMessageSize)
	for {
		if err := c.SetDeadline(time.Now().Add(h.s.idleTimeout)); err != nil {
			return
		}
		if _, err := io.ReadFull(c, buf[:2]); err != nil {
			return // EOF, idle or closed: the connection's end
		}
		n := int(binary.BigEndian.Uint16(buf[:2]))
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			return
		}
		resp := h.answer(buf[:n], true)
		if resp == nil {
			continue
		}
		out := make([]byte, 2+len(resp))
		binary.BigEndian.PutUint16(out, uint16(len(resp)))
		copy(out[2:], resp)
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// answer returns the encoded response to the query msg, or nil when none
// is due (not a query, or too short to hold a header).
func (h *handler) answer(msg []byte, tcp bool) []byte {
	var p dnsmessage.Parser
	hdr, err := p.Start(msg)
	if err != nil || hdr.Response {
		return nil
	}
	resp := dnsmessage.Message{Header: dnsmessage.Header{
		ID:               hdr.ID,
		Response:         true,
		OpCode:           hdr.OpCode,
		RecursionDesired: hdr.RecursionDesired,
	}}
	if hdr.OpCode != 0 {
		resp.Header.RCode = dnsmessage.RCodeNotImplemented
		return h.encode(resp, minUDPSize, tcp)
	}
	q, err := p.Question()
	if err != nil {
		resp.Header.RCode = dnsmessage.RCodeFormatError
		return h.encode(resp, minUDPSize, tcp)
	}
	resp.Questions = []dnsmessage.Question{q}
	if _, err := p.Question(); !errors.Is(err, dnsmessage.ErrSectionDone) {
		// A second question, or a malformed section: one question per
		// query is all any server answers.
		resp.Header.RCode = dnsmessage.RCodeFormatError
		return h.encode(resp, minUDPSize, tcp)
	}
	udpSize, opt, rcode := readEDNS(&p)
	if opt != nil {
		resp.Additionals = append(resp.Additionals, *opt)
	}
	if rcode != dnsmessage.RCodeSuccess {
		resp.Header.RCode = rcode
		return h.encode(resp, udpSize, tcp)
	}
	switch {
	case q.Class != dnsmessage.ClassINET:
		resp.Header.RCode = dnsmessage.RCodeNotImplemented
		return h.encode(resp, udpSize, tcp)
	case q.Type == dnsmessage.TypeOPT:
		resp.Header.RCode = dnsmessage.RCodeFormatError
		return h.encode(resp, udpSize, tcp)
	case q.Type == dnsmessage.TypeAXFR || q.Type == typeIXFR || q.Type == typeMAILB || q.Type == typeMAILA:
		resp.Header.RCode = dnsmessage.RCodeNotImplemented
		return h.encode(resp, udpSize, tcp)
	}
	labels, ok := h.r.inDomain(q.Name.String())
	if !ok {
		return h.answerReverse(resp, q, udpSize, tcp)
	}
	if !h.s.Ready() {
		resp.Header.RCode = dnsmessage.RCodeServerFailure
		return h.encode(resp, udpSize, tcp)
	}
	a, err := h.r.resolve(q, labels)
	if err != nil {
		h.s.logf("clusterdns: answering %s %s: %v", q.Name, q.Type, err)
		resp.Header.RCode = dnsmessage.RCodeServerFailure
		return h.encode(resp, udpSize, tcp)
	}
	resp.Header.Authoritative = true
	resp.Header.RCode = a.rcode
	resp.Answers = a.answers
	if a.soa {
		soa, err := h.r.soa()
		if err != nil {
			h.s.logf("clusterdns: answering %s %s: %v", q.Name, q.Type, err)
			resp.Header.RCode = dnsmessage.RCodeServerFailure
			return h.encode(resp, udpSize, tcp)
		}
		resp.Authorities = []dnsmessage.Resource{soa}
	}
	resp.Additionals = append(a.additionals, resp.Additionals...)
	return h.encode(resp, udpSize, tcp)
}

// answerReverse answers a question outside the domain: a reverse lookup
// of a Service's cluster IP or an endpoint's address gets its PTR records;
// anything else is refused.
func (h *handler) answerReverse(resp dnsmessage.Message, q dnsmessage.Question, udpSize int, tcp bool) []byte {
	addr, ok := reverseAddr(strings.TrimSuffix(strings.ToLower(q.Name.String()), "."))
	if !ok {
		resp.Header.RCode = dnsmessage.RCodeRefused
		return h.encode(resp, udpSize, tcp)
	}
	if !h.s.Ready() {
		resp.Header.RCode = dnsmessage.RCodeServerFailure
		return h.encode(resp, udpSize, tcp)
	}
	a, found, err := h.r.resolvePTR(q.Name, q.Type, addr)
	switch {
	case err != nil:
		h.s.logf("clusterdns: answering %s %s: %v", q.Name, q.Type, err)
		resp.Header.RCode = dnsmessage.RCodeServerFailure
	case !found:
		resp.Header.RCode = dnsmessage.RCodeRefused
	default:
		resp.Header.Authoritative = true
		resp.Answers = a.answers
	}
	return h.encode(resp, udpSize, tcp)
}

// readEDNS reads the additional section for the query's OPT record: the
// UDP answer size it allows, the OPT record to answer with (nil when the
// query had none) and FORMERR or BADVERS when it is wrong.
func readEDNS(p *dnsmessage.Parser) (int, *dnsmessage.Resource, dnsmessage.RCode) {
	if err := p.SkipAllAnswers(); err != nil {
		return minUDPSize, nil, dnsmessage.RCodeFormatError
	}
	if err := p.SkipAllAuthorities(); err != nil {
		return minUDPSize, nil, dnsmessage.RCodeFormatError
	}
	var opts []dnsmessage.ResourceHeader
	for {
		rh, err := p.AdditionalHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			break
		}
		if err != nil {
			return minUDPSize, nil, dnsmessage.RCodeFormatError
		}
		if rh.Type == dnsmessage.TypeOPT {
			opts = append(opts, rh)
		}
		if err := p.SkipAdditional(); err != nil {
			return minUDPSize, nil, dnsmessage.RCodeFormatError
		}
	}
	if len(opts) == 0 {
		return minUDPSize, nil, dnsmessage.RCodeSuccess
	}
	var opt dnsmessage.ResourceHeader
	rcode := dnsmessage.RCodeSuccess
	if len(opts) > 1 || opts[0].Name.String() != "." {
		rcode = dnsmessage.RCodeFormatError // RFC 6891 6.1.1
	} else if version := opts[0].TTL >> 16 & 0xff; version != 0 {
		rcode = rcodeBadVers
	}
	if err := opt.SetEDNS0(ednsUDPSize, rcode, false); err != nil {
		return minUDPSize, nil, dnsmessage.RCodeServerFailure
	}
	size := min(max(int(opts[0].Class), minUDPSize), ednsUDPSize)
	return size, &dnsmessage.Resource{Header: opt, Body: &dnsmessage.OPTResource{}}, rcode
}

// encode packs resp within limit bytes over UDP (with TC set and the
// records left out beyond it, so the resolver asks over TCP) or within
// the 64 KiB message over TCP (with trailing answers left out beyond it).
// It returns nil when resp cannot be packed, after logging why.
func (h *handler) encode(resp dnsmessage.Message, udpLimit int, tcp bool) []byte {
	// The header holds the low four bits of an extended rcode; the OPT
	// record (made by readEDNS) the rest.
	resp.Header.RCode &= 0xf
	out, err := resp.Pack()
	if err != nil {
		h.s.logf("clusterdns: packing the answer to %v: %v", resp.Questions, err)
		resp.Header.RCode = dnsmessage.RCodeServerFailure
		resp.Answers, resp.Authorities, resp.Additionals = nil, nil, optOnly(resp.Additionals)
		if out, err = resp.Pack(); err != nil {
			return nil
		}
		return out
	}
	limit := udpLimit
	if tcp {
		limit = maxMessageSize
	}
	if len(out) <= limit {
		return out
	}
	if !tcp {
		resp.Header.Truncated = true
		resp.Answers, resp.Authorities, resp.Additionals = nil, nil, optOnly(resp.Additionals)
		out, err = resp.Pack()
		if err != nil {
			return nil
		}
		return out
	}
	// Over TCP: as many answers as fit, found by halving; the additional
	// section (SRV targets' addresses) is the first to go.
	resp.Additionals = optOnly(resp.Additionals)
	all := resp.Answers
	lo, hi := 0, len(all) // lo answers fit; hi do not (or are all)
	var best []byte
	for lo <= hi {
		mid := (lo + hi) / 2
		resp.Answers = all[:mid]
		b, err := resp.Pack()
		if err == nil && len(b) <= limit {
			best, lo = b, mid+1
		} else {
			hi = mid - 1
		}
	}
	return best
}

// optOnly keeps the OPT record of an additional section.
func optOnly(rs []dnsmessage.Resource) []dnsmessage.Resource {
	var out []dnsmessage.Resource
	for _, r := range rs {
		if r.Header.Type == dnsmessage.TypeOPT {
			out = append(out, r)
		}
	}
	return out
}
