package dnstraffic

import (
	"strings"

	"github.com/miekg/dns"
)

const (
	// maxUDPSize is the largest UDP reply sent and the EDNS0 size
	// advertised: 1232 avoids IP fragmentation (DNS flag day 2020).
	maxUDPSize = 1232
	// SOA timers; nothing transfers these zones, so only the minimum (the
	// negative-caching TTL) matters.
	soaRefresh = 3600
	soaRetry   = 600
	soaExpire  = 86400
)

// Answer is AnswerFor(req, 0).
func (s *Snapshot) Answer(req *dns.Msg) *dns.Msg { return s.AnswerFor(req, 0) }

// AnswerFor computes the reply to req, the query numbered n, from the
// snapshot: where a host has alternative answers (weights, hostname load
// balancers) n picks one, so consecutive numbers spread them in the
// weights' shares. It is pure: no I/O, no shared state written, safe on
// any message Unpack returns. The reply is not truncated; the transport
// does that.
func (s *Snapshot) AnswerFor(req *dns.Msg, n uint64) *dns.Msg {
	m := &dns.Msg{}
	m.Id = req.Id
	m.Response = true
	m.Opcode = req.Opcode
	m.RecursionDesired = req.RecursionDesired
	m.CheckingDisabled = req.CheckingDisabled
	if len(req.Question) == 1 {
		m.Question = []dns.Question{req.Question[0]}
	}

	var opt *dns.OPT
	nopt := 0
	for _, rr := range req.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			opt = o
			nopt++
		}
	}
	if nopt > 1 { // RFC 6891 6.1.1
		m.Rcode = dns.RcodeFormatError
		return m
	}
	if opt != nil {
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.SetUDPSize(maxUDPSize)
		m.Extra = []dns.RR{o}
		if opt.Version() != 0 {
			m.Rcode = dns.RcodeBadVers
			return m
		}
	}

	switch {
	case req.Response:
		m.Rcode = dns.RcodeFormatError
		return m
	case req.Opcode != dns.OpcodeQuery:
		m.Rcode = dns.RcodeNotImplemented
		return m
	case len(req.Question) != 1:
		m.Rcode = dns.RcodeFormatError
		return m
	}
	q := req.Question[0]
	switch {
	case q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY:
		m.Rcode = dns.RcodeRefused
		return m
	case q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR:
		m.Rcode = dns.RcodeRefused // no zone transfers: replicas build their own
		return m
	case !s.Synced():
		m.Rcode = dns.RcodeServerFailure
		return m
	}

	name := asciiLower(q.Name)
	if !dns.IsFqdn(name) {
		name += "."
	}
	apex := zoneOf(s.zones, name)
	if apex == "" {
		m.Rcode = dns.RcodeRefused
		return m
	}
	m.Authoritative = true
	e := s.lookup(name, apex)
	if e == nil {
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{s.soa(apex)}
		return m
	}
	ttl := s.ttl
	if e.ttl != 0 {
		ttl = e.ttl
	}
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: q.Name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
	}
	g := e.pick(n)
	if g != nil && g.cname != "" {
		// A CNAME answers every type at its name (RFC 1034 3.6.2); the
		// resolver follows it.
		m.Answer = append(m.Answer, &dns.CNAME{Hdr: hdr(dns.TypeCNAME), Target: g.cname})
		return m
	}
	qtype := q.Qtype
	if qtype == dns.TypeANY {
		qtype = minimalAny(g, name == apex)
	}
	if qtype == dns.TypeA && g != nil {
		for _, ip := range g.v4 {
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr(dns.TypeA), A: ip})
		}
	}
	if qtype == dns.TypeAAAA && g != nil {
		for _, ip := range g.v6 {
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: ip})
		}
	}
	if qtype == dns.TypeSOA && name == apex {
		soa := s.soa(apex)
		soa.Hdr.Name = q.Name
		m.Answer = append(m.Answer, soa)
	}
	if len(m.Answer) == 0 {
		m.Ns = []dns.RR{s.soa(apex)} // NODATA, negatively cacheable
	}
	return m
}

// minimalAny is the one RRset type an ANY query gets (RFC 8482 4.1): A
// if the name has IPv4 addresses, else AAAA, else the SOA at an apex.
// Never every type: ANY is the classic amplification query, and a resolver
// must not take a partial ANY for the whole name anyway. A name with none
// of these has no records at all, so NODATA is the true answer for it.
func minimalAny(g *group, apex bool) uint16 {
	switch {
	case g != nil && len(g.v4) > 0:
		return dns.TypeA
	case g != nil && len(g.v6) > 0:
		return dns.TypeAAAA
	case apex:
		return dns.TypeSOA
	}
	return dns.TypeNone
}

// lookup returns the entry of name inside apex, nil if the name does not
// exist. It follows RFC 4592, as every DNS provider's zone does, so the
// embedded server and a zone ExternalDNS programs give one answer: a name
// that exists (a host, an ancestor of one, the apex) is answered as itself
// and never by a wildcard; another name is answered by the wildcard of its
// closest encloser (its longest existing ancestor), if that has one, at
// any depth ("a.b.example.com" by "*.example.com" unless b.example.com
// exists). Ingress routes a wildcard one label deep; a deeper name reaches
// the wildcard owner's load balancers, as through any provider.
func (s *Snapshot) lookup(name, apex string) *entry {
	if e, ok := s.names[name]; ok {
		return e
	}
	for p := parent(name); p != "" && len(p) >= len(apex); p = parent(p) {
		if _, ok := s.names[p]; ok {
			return s.wild[p]
		}
		// A wildcard is a name that exists too: below it is nothing.
		if strings.HasPrefix(p, "*.") && s.wild[p[2:]] != nil {
			return nil
		}
	}
	return nil
}

// soa is the zone's SOA; its minimum is the TTL so NXDOMAIN and NODATA are
// cached no longer than positive answers.
func (s *Snapshot) soa(apex string) *dns.SOA {
	hostmaster := "hostmaster." + apex
	if apex == "." {
		hostmaster = "hostmaster."
	}
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: apex, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: s.ttl},
		Ns:      apex,
		Mbox:    hostmaster,
		Serial:  s.serial,
		Refresh: soaRefresh,
		Retry:   soaRetry,
		Expire:  soaExpire,
		Minttl:  s.ttl,
	}
}
