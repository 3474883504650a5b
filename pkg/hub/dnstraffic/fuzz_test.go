package dnstraffic

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"
)

// fuzzSeeds are wire messages: valid queries and the malformed shapes a
// server meets in the wild.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	pack := func(m *dns.Msg) []byte {
		b, err := m.Pack()
		if err != nil {
			panic(err)
		}
		return b
	}
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"web.example.com.", dns.TypeA}, {"WEB.example.com.", dns.TypeAAAA}, {"web.example.com.", dns.TypeANY},
		{"x.apps.example.com.", dns.TypeA}, {"example.com.", dns.TypeSOA}, {"nope.example.com.", dns.TypeMX},
		{".", dns.TypeNS}, {"web.example.com.", dns.TypeAXFR},
	} {
		seeds = append(seeds, pack(query(q.name, q.qtype)))
	}
	edns := query("web.example.com.", dns.TypeA)
	edns.SetEdns0(4096, true)
	seeds = append(seeds, pack(edns))
	bad := query("web.example.com.", dns.TypeA)
	bad.SetEdns0(100, false)
	bad.IsEdns0().SetVersion(3)
	seeds = append(seeds, pack(bad))
	notify := query("example.com.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	seeds = append(seeds, pack(notify))

	valid := pack(query("web.example.com.", dns.TypeA))
	for _, n := range []int{0, 1, 11, 12, 13, 20, len(valid) - 1} {
		seeds = append(seeds, valid[:n]) // truncated
	}
	hdr := func(qd, an, ns, ar uint16) []byte {
		b := make([]byte, 12)
		binary.BigEndian.PutUint16(b[0:], 0x1234)
		binary.BigEndian.PutUint16(b[4:], qd)
		binary.BigEndian.PutUint16(b[6:], an)
		binary.BigEndian.PutUint16(b[8:], ns)
		binary.BigEndian.PutUint16(b[10:], ar)
		return b
	}
	// Compression pointer to itself, and two pointing at each other.
	seeds = append(seeds, append(hdr(1, 0, 0, 0), 0xc0, 0x0c, 0, 1, 0, 1))
	seeds = append(seeds, append(hdr(1, 0, 0, 0), 0xc0, 0x0e, 0xc0, 0x0c, 0, 1, 0, 1))
	// Pointer forward past the end.
	seeds = append(seeds, append(hdr(1, 0, 0, 0), 0xc0, 0xff, 0, 1, 0, 1))
	// Huge counts with little data.
	seeds = append(seeds, append(hdr(0xffff, 0, 0, 0), valid[12:]...))
	seeds = append(seeds, append(hdr(1, 0xffff, 0xffff, 0xffff), valid[12:]...))
	seeds = append(seeds, hdr(0, 0, 0, 0))
	// Response bit set.
	resp := append([]byte(nil), valid...)
	resp[2] |= 0x80
	seeds = append(seeds, resp)
	return seeds
}

func fuzzSnapshot() *Snapshot {
	s, _ := NewSnapshot(testMCIs(), nil, 5*time.Second, DomainRules{})
	return s
}

// FuzzAnswer: whatever Unpack accepts, Answer replies with a message that
// packs.
func FuzzAnswer(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	snap := fuzzSnapshot()
	f.Fuzz(func(t *testing.T, b []byte) {
		req := new(dns.Msg)
		if err := req.Unpack(b); err != nil {
			return
		}
		resp := snap.Answer(req)
		if resp.Id != req.Id || !resp.Response {
			t.Fatalf("reply id %d response %v", resp.Id, resp.Response)
		}
		if _, err := resp.Pack(); err != nil {
			t.Fatalf("reply to %v does not pack: %v\n%v", req, err, resp)
		}
	})
}

// FuzzServeDNS: the handler, on both transports and from a current, a stale
// and an expired view, never panics, answers within the size the transport
// allows, and its reply packs. It gets every message Unpack accepts, not
// only what the server's MsgAcceptFunc lets through, so the filter is not
// what keeps it safe.
func FuzzServeDNS(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	s := &Server{table: &Table{}, metrics: NewMetrics(prometheus.NewRegistry()), sem: make(chan struct{}, 4)}
	s.table.snap.Store(fuzzSnapshot())
	s.opts.TCPReadTimeout = time.Second
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	views := []*freshness{nil}
	for _, age := range []time.Duration{time.Minute, 2 * time.Hour} { // stale, expired
		v := &freshness{check: func(context.Context) error { return nil }, horizon: time.Hour, clock: clk}
		v.lastOK.Store(clk.Now().Add(-age).UnixNano())
		v.failing.Store(true)
		views = append(views, v)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req := new(dns.Msg)
		if err := req.Unpack(b); err != nil {
			return // the server replies FORMERR itself or drops it
		}
		for i := range 2 * len(views) {
			tcp := i%2 == 1
			s.fresh = views[i/2]
			w := &fakeWriter{tcp: tcp}
			s.ServeDNS(w, req)
			if len(w.msgs) != 1 {
				t.Fatalf("tcp=%v: %d replies to %v", tcp, len(w.msgs), req)
			}
			limit := dns.MaxMsgSize
			if !tcp {
				limit = udpSize(req)
			}
			if len(w.packed[0]) > limit {
				t.Fatalf("tcp=%v: reply of %d bytes over %d", tcp, len(w.packed[0]), limit)
			}
		}
		if v := counterValue(t, s.metrics.Panics); v != 0 {
			t.Fatalf("handler panicked on %v", req)
		}
	})
}
