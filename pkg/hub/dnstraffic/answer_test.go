package dnstraffic

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
)

func testMCIs() []*networkingv1alpha1.MultiClusterIngress {
	return []*networkingv1alpha1.MultiClusterIngress{
		newMCI("web", []string{"web.example.com", ""}, "10.0.0.2", "10.0.0.1", "2001:db8::1", "lb.example.net"),
		later(newMCI("web-b", []string{"Web.Example.com."}, "10.0.0.3", "10.0.0.1")), // web owns the host: ignored
		newMCI("blocked", []string{"blocked.example.com"}),                           // every cluster blocked
		newMCI("names-only", []string{"lb.example.com"}, "lb.example.net"),           // hostnames are not answers
		newMCI("v6", []string{"v6.example.com"}, "2001:db8::2"),
		newMCI("wild", []string{"*.apps.example.com"}, "10.0.1.1"),
		newMCI("deep", []string{"a.b.deep.example.org"}, "10.0.2.1"),
		newMCI("bad", []string{"bad host!", "a.*.example.com"}, "10.9.9.9"),
	}
}

// later gives mci a creation time after the zero time of newMCI's.
func later(mci *networkingv1alpha1.MultiClusterIngress) *networkingv1alpha1.MultiClusterIngress {
	mci.CreationTimestamp = metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	return mci
}

// want describes a reply: rcode, answers as "type value" strings in order
// (sorted by the test), and the SOA owner in authority ("" for none).
type want struct {
	rcode   int
	answers []string
	soa     string
	aa      bool
}

func rrStrings(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		switch r := rr.(type) {
		case *dns.A:
			out = append(out, "A "+r.A.String())
		case *dns.AAAA:
			out = append(out, "AAAA "+r.AAAA.String())
		case *dns.SOA:
			out = append(out, "SOA "+r.Hdr.Name)
		default:
			out = append(out, rr.String())
		}
	}
	slices.Sort(out)
	return out
}

func check(t *testing.T, req, resp *dns.Msg, w want, ttl uint32) {
	t.Helper()
	if resp.Id != req.Id || !resp.Response {
		t.Errorf("id %d response %v, want id %d response", resp.Id, resp.Response, req.Id)
	}
	if resp.Rcode != w.rcode {
		t.Errorf("rcode %s, want %s", dns.RcodeToString[resp.Rcode], dns.RcodeToString[w.rcode])
	}
	if resp.Authoritative != w.aa {
		t.Errorf("AA %v, want %v", resp.Authoritative, w.aa)
	}
	if resp.RecursionAvailable {
		t.Error("RA set")
	}
	if resp.RecursionDesired != req.RecursionDesired {
		t.Errorf("RD %v, want it copied (%v)", resp.RecursionDesired, req.RecursionDesired)
	}
	if got := rrStrings(resp.Answer); !slices.Equal(got, w.answers) {
		t.Errorf("answers %v, want %v", got, w.answers)
	}
	for _, rr := range resp.Answer {
		if rr.Header().Ttl != ttl {
			t.Errorf("TTL %d, want %d: %v", rr.Header().Ttl, ttl, rr)
		}
		if rr.Header().Rrtype != dns.TypeSOA && rr.Header().Name != req.Question[0].Name {
			t.Errorf("owner %q, want the question's %q", rr.Header().Name, req.Question[0].Name)
		}
	}
	var soa string
	for _, rr := range resp.Ns {
		s, ok := rr.(*dns.SOA)
		if !ok {
			t.Errorf("authority has %v", rr)
			continue
		}
		soa = s.Hdr.Name
		if s.Minttl != ttl || s.Hdr.Ttl != ttl {
			t.Errorf("SOA minimum %d TTL %d, want %d", s.Minttl, s.Hdr.Ttl, ttl)
		}
	}
	if soa != w.soa {
		t.Errorf("authority SOA %q, want %q", soa, w.soa)
	}
	if _, err := resp.Pack(); err != nil {
		t.Errorf("reply does not pack: %v", err)
	}
}

func TestAnswer(t *testing.T) {
	noZones, _ := NewSnapshot(testMCIs(), nil, 5*time.Second, DomainRules{})
	zoned, ignored := NewSnapshot(append(testMCIs(), newMCI("ent", []string{"x.y.example.com"}, "10.0.3.1")),
		[]string{"example.com.", "sub.example.com."}, 30*time.Second, DomainRules{})

	web := []string{"A 10.0.0.1", "A 10.0.0.2"} // not web-b's 10.0.0.3
	withRD := func(m *dns.Msg) *dns.Msg { m.RecursionDesired = true; return m }
	noRD := func(m *dns.Msg) *dns.Msg { m.RecursionDesired = false; return m }
	withClass := func(c uint16) func(*dns.Msg) *dns.Msg {
		return func(m *dns.Msg) *dns.Msg { m.Question[0].Qclass = c; return m }
	}
	withOpcode := func(op int) func(*dns.Msg) *dns.Msg { return func(m *dns.Msg) *dns.Msg { m.Opcode = op; return m } }
	questions := func(n int) func(*dns.Msg) *dns.Msg {
		return func(m *dns.Msg) *dns.Msg {
			q := m.Question[0]
			m.Question = nil
			for range n {
				m.Question = append(m.Question, q)
			}
			return m
		}
	}
	id := func(m *dns.Msg) *dns.Msg { return m }

	tests := []struct {
		name  string
		snap  *Snapshot
		qname string
		qtype uint16
		mod   func(*dns.Msg) *dns.Msg
		want  want
	}{
		{"A", noZones, "web.example.com.", dns.TypeA, withRD, want{dns.RcodeSuccess, web, "", true}},
		{"A without RD", noZones, "web.example.com.", dns.TypeA, noRD, want{dns.RcodeSuccess, web, "", true}},
		{"mixed case", noZones, "WEB.Example.COM.", dns.TypeA, id, want{dns.RcodeSuccess, web, "", true}},
		{"AAAA", noZones, "web.example.com.", dns.TypeAAAA, id, want{dns.RcodeSuccess, []string{"AAAA 2001:db8::1"}, "", true}},
		// RFC 8482: one RRset, never every type of the name.
		{"ANY is the A RRset only", noZones, "web.example.com.", dns.TypeANY, id, want{dns.RcodeSuccess, web, "", true}},
		{"ANY, IPv6 only, is the AAAA RRset", noZones, "v6.example.com.", dns.TypeANY, id, want{dns.RcodeSuccess, []string{"AAAA 2001:db8::2"}, "", true}},
		{"ANY, no address, at an apex is the SOA", noZones, "blocked.example.com.", dns.TypeANY, id, want{dns.RcodeSuccess, []string{"SOA blocked.example.com."}, "", true}},
		{"ANY on a wildcard", noZones, "shop.apps.example.com.", dns.TypeANY, id, want{dns.RcodeSuccess, []string{"A 10.0.1.1"}, "", true}},
		{"ANY unknown is NXDOMAIN", noZones, "x.web.example.com.", dns.TypeANY, id, want{dns.RcodeNameError, nil, "web.example.com.", true}},
		{"zoned: ANY on an empty non-terminal is NODATA", zoned, "y.example.com.", dns.TypeANY, id, want{dns.RcodeSuccess, nil, "example.com.", true}},
		{"zoned: ANY at the apex is the SOA", zoned, "example.com.", dns.TypeANY, id, want{dns.RcodeSuccess, []string{"SOA example.com."}, "", true}},
		{"class ANY", noZones, "web.example.com.", dns.TypeA, withClass(dns.ClassANY), want{dns.RcodeSuccess, web, "", true}},
		{"other type is NODATA", noZones, "web.example.com.", dns.TypeMX, id, want{dns.RcodeSuccess, nil, "web.example.com.", true}},
		{"SOA at apex", noZones, "web.example.com.", dns.TypeSOA, id, want{dns.RcodeSuccess, []string{"SOA web.example.com."}, "", true}},
		{"all clusters blocked is NODATA", noZones, "blocked.example.com.", dns.TypeA, id, want{dns.RcodeSuccess, nil, "blocked.example.com.", true}},
		{"hostnames are not answers", noZones, "lb.example.com.", dns.TypeA, id, want{dns.RcodeSuccess, nil, "lb.example.com.", true}},
		{"IPv6 only, A is NODATA", noZones, "v6.example.com.", dns.TypeA, id, want{dns.RcodeSuccess, nil, "v6.example.com.", true}},
		{"IPv6 only, AAAA", noZones, "v6.example.com.", dns.TypeAAAA, id, want{dns.RcodeSuccess, []string{"AAAA 2001:db8::2"}, "", true}},
		{"wildcard", noZones, "shop.apps.example.com.", dns.TypeA, id, want{dns.RcodeSuccess, []string{"A 10.0.1.1"}, "", true}},
		{"wildcard literal", noZones, "*.apps.example.com.", dns.TypeA, id, want{dns.RcodeSuccess, []string{"A 10.0.1.1"}, "", true}},
		{"wildcard answers deeper names too (RFC 4592)", noZones, "a.shop.apps.example.com.", dns.TypeA, id, want{dns.RcodeSuccess, []string{"A 10.0.1.1"}, "", true}},
		{"below the wildcard name itself is NXDOMAIN", noZones, "a.*.apps.example.com.", dns.TypeA, id, want{dns.RcodeNameError, nil, "apps.example.com.", true}},
		{"wildcard parent is its apex", noZones, "apps.example.com.", dns.TypeA, id, want{dns.RcodeSuccess, nil, "apps.example.com.", true}},
		{"below a host is NXDOMAIN", noZones, "x.web.example.com.", dns.TypeA, id, want{dns.RcodeNameError, nil, "web.example.com.", true}},
		{"deep host", noZones, "a.b.deep.example.org.", dns.TypeA, id, want{dns.RcodeSuccess, []string{"A 10.0.2.1"}, "", true}},
		{"parent of a host is outside", noZones, "example.com.", dns.TypeA, id, want{dns.RcodeRefused, nil, "", false}},
		{"unknown domain", noZones, "example.net.", dns.TypeA, id, want{dns.RcodeRefused, nil, "", false}},
		{"root", noZones, ".", dns.TypeA, id, want{dns.RcodeRefused, nil, "", false}},
		{"invalid host ignored", noZones, "a.*.example.com.", dns.TypeA, id, want{dns.RcodeRefused, nil, "", false}},
		{"class CH", noZones, "web.example.com.", dns.TypeA, withClass(dns.ClassCHAOS), want{dns.RcodeRefused, nil, "", false}},
		{"AXFR", noZones, "web.example.com.", dns.TypeAXFR, id, want{dns.RcodeRefused, nil, "", false}},
		{"NOTIFY", noZones, "web.example.com.", dns.TypeSOA, withOpcode(dns.OpcodeNotify), want{dns.RcodeNotImplemented, nil, "", false}},
		{"UPDATE", noZones, "web.example.com.", dns.TypeSOA, withOpcode(dns.OpcodeUpdate), want{dns.RcodeNotImplemented, nil, "", false}},
		{"no question", noZones, "web.example.com.", dns.TypeA, questions(0), want{dns.RcodeFormatError, nil, "", false}},
		{"two questions", noZones, "web.example.com.", dns.TypeA, questions(2), want{dns.RcodeFormatError, nil, "", false}},
		{"not synced", &Snapshot{}, "web.example.com.", dns.TypeA, id, want{dns.RcodeServerFailure, nil, "", false}},
		{"nil snapshot", nil, "web.example.com.", dns.TypeA, id, want{dns.RcodeServerFailure, nil, "", false}},

		{"zoned: host", zoned, "web.example.com.", dns.TypeA, id, want{dns.RcodeSuccess, web, "", true}},
		{"zoned: apex SOA", zoned, "example.com.", dns.TypeSOA, id, want{dns.RcodeSuccess, []string{"SOA example.com."}, "", true}},
		{"zoned: apex A is NODATA", zoned, "example.com.", dns.TypeA, id, want{dns.RcodeSuccess, nil, "example.com.", true}},
		{"zoned: unknown is NXDOMAIN", zoned, "nope.example.com.", dns.TypeA, id, want{dns.RcodeNameError, nil, "example.com.", true}},
		{"zoned: empty non-terminal is NODATA", zoned, "y.example.com.", dns.TypeA, id, want{dns.RcodeSuccess, nil, "example.com.", true}},
		{"zoned: host below ENT", zoned, "x.y.example.com.", dns.TypeA, id, want{dns.RcodeSuccess, []string{"A 10.0.3.1"}, "", true}},
		{"zoned: wildcard parent is ENT", zoned, "apps.example.com.", dns.TypeA, id, want{dns.RcodeSuccess, nil, "example.com.", true}},
		{"zoned: wildcard", zoned, "x.apps.example.com.", dns.TypeAAAA, id, want{dns.RcodeSuccess, nil, "example.com.", true}},
		{"zoned: nested zone", zoned, "q.sub.example.com.", dns.TypeA, id, want{dns.RcodeNameError, nil, "sub.example.com.", true}},
		{"zoned: host outside zones ignored", zoned, "a.b.deep.example.org.", dns.TypeA, id, want{dns.RcodeRefused, nil, "", false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.mod(query(tt.qname, tt.qtype))
			ttl := uint32(5)
			if tt.snap == zoned {
				ttl = 30
			}
			check(t, req, tt.snap.Answer(req), tt.want, ttl)
		})
	}

	var hosts []string
	for _, ig := range ignored {
		hosts = append(hosts, ig.Host+": "+ig.Reason)
	}
	slices.Sort(hosts)
	wantIgnored := []string{"a.*.example.com: not a valid DNS name", "a.b.deep.example.org: outside every zone", "bad host!: not a valid DNS name",
		"web.example.com: claimed by default/web-b but owned by default/web, an older MultiClusterIngress"}
	if !slices.Equal(hosts, wantIgnored) {
		t.Errorf("ignored %v, want %v", hosts, wantIgnored)
	}
	if noZones.Hosts() != 6 {
		t.Errorf("hosts %d, want 6", noZones.Hosts())
	}
}

func TestAnswerEDNS(t *testing.T) {
	snap, _ := NewSnapshot(testMCIs(), nil, 5*time.Second, DomainRules{})

	req := query("web.example.com.", dns.TypeA)
	req.SetEdns0(4096, true)
	resp := snap.Answer(req)
	opt := resp.IsEdns0()
	if resp.Rcode != dns.RcodeSuccess || opt == nil || opt.UDPSize() != maxUDPSize || opt.Version() != 0 || opt.Do() {
		t.Errorf("EDNS reply rcode %d OPT %v, want NOERROR with OPT size %d", resp.Rcode, opt, maxUDPSize)
	}

	req.IsEdns0().SetVersion(1)
	resp = snap.Answer(req)
	if resp.Rcode != dns.RcodeBadVers || resp.IsEdns0() == nil || len(resp.Answer) != 0 {
		t.Errorf("EDNS version 1: rcode %d, want BADVERS with OPT", resp.Rcode)
	}
	if _, err := resp.Pack(); err != nil {
		t.Error(err)
	}

	req = query("web.example.com.", dns.TypeA)
	req.SetEdns0(1232, false)
	req.Extra = append(req.Extra, req.Extra[0])
	if resp := snap.Answer(req); resp.Rcode != dns.RcodeFormatError {
		t.Errorf("two OPT records: rcode %d, want FORMERR", resp.Rcode)
	}
}

func TestAnswerSerialIsContentHash(t *testing.T) {
	a, _ := NewSnapshot(testMCIs(), nil, time.Second, DomainRules{})
	rev := testMCIs()
	slices.Reverse(rev)
	b, _ := NewSnapshot(rev, nil, time.Second, DomainRules{})
	if a.serial != b.serial {
		t.Errorf("serial depends on MCI order: %d != %d", a.serial, b.serial)
	}
	c, _ := NewSnapshot(append(testMCIs(), newMCI("more", []string{"more.example.com"}, "10.0.0.9")), nil, time.Second, DomainRules{})
	if a.serial == c.serial {
		t.Error("serial unchanged by a new address")
	}
}

func TestHandlerTruncates(t *testing.T) {
	var addrs []string
	for i := range 200 {
		addrs = append(addrs, fmt.Sprintf("10.1.%d.%d", i/250, i%250+1))
	}
	f := newHandlerOnly(t, Options{}, newMCI("big", []string{"big.example.com"}, addrs...))

	for _, tc := range []struct {
		name    string
		tcp     bool
		edns    uint16
		maxLen  int
		trunc   bool
		answers int
	}{
		{"UDP no EDNS", false, 0, 512, true, -1},
		{"UDP EDNS 4096 capped", false, 4096, maxUDPSize, true, -1},
		{"UDP EDNS 100 means 512", false, 100, 512, true, -1},
		{"TCP", true, 0, dns.MaxMsgSize, false, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := query("big.example.com.", dns.TypeA)
			if tc.edns != 0 {
				req.SetEdns0(tc.edns, false)
			}
			w := &fakeWriter{tcp: tc.tcp}
			f.ServeDNS(w, req)
			if len(w.msgs) != 1 {
				t.Fatalf("%d replies", len(w.msgs))
			}
			resp, b := w.msgs[0], w.packed[0]
			if len(b) > tc.maxLen {
				t.Errorf("reply %d bytes, want at most %d", len(b), tc.maxLen)
			}
			if resp.Truncated != tc.trunc {
				t.Errorf("TC %v, want %v", resp.Truncated, tc.trunc)
			}
			if tc.answers >= 0 && len(resp.Answer) != tc.answers {
				t.Errorf("%d answers, want %d", len(resp.Answer), tc.answers)
			}
			if tc.edns != 0 && resp.IsEdns0() == nil {
				t.Error("OPT dropped by truncation")
			}
		})
	}
}

func TestHandlerRotates(t *testing.T) {
	s := newHandlerOnly(t, Options{}, newMCI("web", []string{"web.example.com"}, "10.0.0.1", "10.0.0.2", "10.0.0.3"))
	firsts := map[string]bool{}
	for range 3 {
		w := &fakeWriter{}
		s.ServeDNS(w, query("web.example.com.", dns.TypeA))
		firsts[w.msgs[0].Answer[0].(*dns.A).A.String()] = true
		if got := rrStrings(w.msgs[0].Answer); len(got) != 3 {
			t.Fatalf("answers %v", got)
		}
	}
	if len(firsts) != 3 {
		t.Errorf("first addresses over 3 queries %v, want all 3", firsts)
	}
}

func TestHandlerMetrics(t *testing.T) {
	s := newHandlerOnly(t, Options{Zones: []string{"example.com"}},
		newMCI("web", []string{"web.example.com"}, "10.0.0.1", "2001:db8::1"), newMCI("blocked", []string{"blocked.example.com"}))
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"web.example.com.", dns.TypeANY}, {"web.example.com.", dns.TypeA}, {"blocked.example.com.", dns.TypeA},
		{"nope.example.com.", dns.TypeA}, {"example.org.", dns.TypeA},
	} {
		s.ServeDNS(&fakeWriter{}, query(q.name, q.qtype))
	}
	req := query("web.example.com.", dns.TypeA)
	req.Opcode = dns.OpcodeStatus
	s.ServeDNS(&fakeWriter{}, req)

	got := counterValues(t, s.metrics.Queries)
	want := map[string]float64{"noerror": 2, "nodata": 1, "nxdomain": 1, "refused": 1, "notimp": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("queries_total{result=%q} = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	recs := counterValues(t, s.metrics.AnswerRecords)
	if recs["A"] != 2 || recs["AAAA"] != 0 { // ANY gets the A RRset only
		t.Errorf("answer_records_total %v, want A 2 AAAA 0", recs)
	}
}

func TestHandlerDropsUDPOverMaxInFlight(t *testing.T) {
	s := newHandlerOnly(t, Options{MaxInFlight: 1}, newMCI("web", []string{"web.example.com"}, "10.0.0.1"))
	entered, release := make(chan struct{}), make(chan struct{})
	var once bool
	s.testHook = func() {
		if !once { // only the first query blocks; the hook runs in one goroutine at a time
			once = true
			close(entered)
			<-release
		}
	}
	first := &fakeWriter{}
	done := make(chan struct{})
	go func() { s.ServeDNS(first, query("web.example.com.", dns.TypeA)); close(done) }()
	<-entered

	second := &fakeWriter{}
	s.ServeDNS(second, query("web.example.com.", dns.TypeA))
	if len(second.msgs) != 0 {
		t.Errorf("query over MaxInFlight answered: %v", second.msgs)
	}
	close(release)
	<-done
	if len(first.msgs) != 1 {
		t.Errorf("in-flight query not answered")
	}
	third := &fakeWriter{}
	s.ServeDNS(third, query("web.example.com.", dns.TypeA))
	if len(third.msgs) != 1 {
		t.Errorf("query after the slot freed not answered")
	}
	got := counterValues(t, s.metrics.Queries)
	if got["dropped"] != 1 || got["noerror"] != 2 {
		t.Errorf("queries_total %v, want dropped 1 noerror 2", got)
	}
}

func TestHandlerRecoversPanic(t *testing.T) {
	s := newHandlerOnly(t, Options{MaxInFlight: 1}, newMCI("web", []string{"web.example.com"}, "10.0.0.1"))
	s.testHook = func() { panic("boom") }
	w := &fakeWriter{}
	s.ServeDNS(w, query("web.example.com.", dns.TypeA))
	if len(w.msgs) != 1 || w.msgs[0].Rcode != dns.RcodeServerFailure {
		t.Fatalf("replies %v, want one SERVFAIL", w.msgs)
	}
	if v := counterValue(t, s.metrics.Panics); v != 1 {
		t.Errorf("panics %v, want 1", v)
	}
	s.testHook = nil
	w = &fakeWriter{}
	s.ServeDNS(w, query("web.example.com.", dns.TypeA)) // the slot was released
	if len(w.msgs) != 1 || w.msgs[0].Rcode != dns.RcodeSuccess {
		t.Fatalf("after a panic: replies %v", w.msgs)
	}
}

func TestNewValidates(t *testing.T) {
	for _, opts := range []Options{
		{},
		{Address: "nohostport"},
		{Address: "127.0.0.1:0", Zones: []string{"bad zone"}},
		{Address: "127.0.0.1:0", Zones: []string{"*.example.com"}},
		{Address: "127.0.0.1:0", TTL: -time.Second},
	} {
		if _, err := New(opts, nil); err == nil {
			t.Errorf("New(%+v) accepted", opts)
		} else if !strings.HasPrefix(err.Error(), "dns traffic manager") {
			t.Errorf("error %q does not say what failed", err)
		}
	}
}
