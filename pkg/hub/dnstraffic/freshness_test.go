package dnstraffic

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

// edeOf is the Extended DNS Error codes of a reply.
func edeOf(resp *dns.Msg) []uint16 {
	var codes []uint16
	if o := resp.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*dns.EDNS0_EDE); ok {
				codes = append(codes, e.InfoCode)
			}
		}
	}
	return codes
}

// The host apiserver stops answering: the server keeps answering from its
// last view, says so to EDNS clients (RFC 8914 Stale Answer) and in its
// metrics, stays Ready up to the horizon, then answers SERVFAIL so
// resolvers turn to another name server, and is current again the moment
// the apiserver answers.
func TestStaleViewIsServedUpToTheHorizon(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	var apiserverDown atomic.Bool
	s := newHandlerOnly(t, Options{StaleHorizon: 10 * time.Minute, Clock: clk,
		FreshnessCheck: func(context.Context) error {
			if apiserverDown.Load() {
				return errors.New("connection refused")
			}
			return nil
		}},
		newMCI("web", []string{"web.example.com"}, "10.0.0.1", "10.0.0.2"))
	listening := "127.0.0.1:53" // Ready asks for it; ServeDNS is called directly
	s.addr.Store(&listening)
	check := func() { s.fresh.once(context.Background(), s.logFreshness) }
	ask := func(edns bool) *dns.Msg {
		t.Helper()
		req := query("web.example.com.", dns.TypeA)
		if edns {
			req.SetEdns0(1232, false)
		}
		w := &fakeWriter{}
		s.ServeDNS(w, req)
		if len(w.msgs) != 1 {
			t.Fatalf("%d replies", len(w.msgs))
		}
		return w.msgs[0]
	}
	wantAnswer := func(resp *dns.Msg, ede ...uint16) {
		t.Helper()
		if got := addrsOf(resp); resp.Rcode != dns.RcodeSuccess || !resp.Authoritative || !slices.Equal(got, []string{"10.0.0.1", "10.0.0.2"}) {
			t.Fatalf("rcode %s AA %v addresses %v, want NOERROR AA both", dns.RcodeToString[resp.Rcode], resp.Authoritative, got)
		}
		if got := edeOf(resp); !slices.Equal(got, ede) {
			t.Fatalf("extended errors %v, want %v", got, ede)
		}
	}

	check()
	wantAnswer(ask(true))
	if s.Ready() != nil || testutil.ToFloat64(s.metrics.StaleAnswers) != 0 {
		t.Fatalf("current view: Ready %v, stale answers %v", s.Ready(), testutil.ToFloat64(s.metrics.StaleAnswers))
	}

	apiserverDown.Store(true)
	clk.Step(30 * time.Second)
	check()
	wantAnswer(ask(true), dns.ExtendedErrorCodeStaleAnswer)
	wantAnswer(ask(false)) // no EDNS: nowhere to say it
	if err := s.Ready(); err != nil {
		t.Fatalf("stale within the horizon: Ready %v, want ready", err)
	}
	if got := testutil.ToFloat64(s.metrics.StaleAnswers); got != 2 {
		t.Fatalf("stale answers %v, want 2", got)
	}
	if got := testutil.ToFloat64(s.metrics.ViewStaleSeconds); got != 30 {
		t.Fatalf("view stale %vs, want 30", got)
	}

	// The age counts from the last check that succeeded, not the first
	// that failed.
	clk.Step(10*time.Minute - 30*time.Second)
	check()
	wantAnswer(ask(true), dns.ExtendedErrorCodeStaleAnswer)
	clk.Step(time.Second)
	check()
	for _, edns := range []bool{true, false} {
		resp := ask(edns)
		if resp.Rcode != dns.RcodeServerFailure || len(resp.Answer) != 0 {
			t.Fatalf("past the horizon (EDNS %v): rcode %s, %d answers; want SERVFAIL and none", edns, dns.RcodeToString[resp.Rcode], len(resp.Answer))
		}
		if want := []uint16{dns.ExtendedErrorCodeOther}; edns && !slices.Equal(edeOf(resp), want) {
			t.Fatalf("past the horizon: extended errors %v, want %v", edeOf(resp), want)
		}
	}
	if s.Ready() == nil {
		t.Fatal("past the horizon: Ready, want not ready (no DNS traffic to this replica)")
	}
	// A malformed query's reply does not come from the view: it stays.
	bad := query("web.example.com.", dns.TypeA)
	bad.Opcode = dns.OpcodeUpdate
	w := &fakeWriter{}
	s.ServeDNS(w, bad)
	if len(w.msgs) != 1 || w.msgs[0].Rcode != dns.RcodeNotImplemented {
		t.Fatalf("past the horizon, an UPDATE: %v, want NOTIMP", w.msgs)
	}

	apiserverDown.Store(false)
	clk.Step(time.Second)
	check()
	wantAnswer(ask(true))
	if s.Ready() != nil || testutil.ToFloat64(s.metrics.ViewStaleSeconds) != 0 {
		t.Fatalf("current again: Ready %v, view stale %vs", s.Ready(), testutil.ToFloat64(s.metrics.ViewStaleSeconds))
	}
}

// A server never told how to check freshness never calls its view stale,
// and a horizon out of range is refused.
func TestFreshnessOptions(t *testing.T) {
	s := newHandlerOnly(t, Options{}, newMCI("web", []string{"web.example.com"}, "10.0.0.1"))
	if st := s.fresh.state(); st.Stale {
		t.Fatalf("no check: %+v", st)
	}
	for _, h := range []time.Duration{-time.Second, 8 * 24 * time.Hour} {
		if _, err := New(Options{Address: "127.0.0.1:0", StaleHorizon: h}, nil); err == nil {
			t.Errorf("stale horizon %v accepted", h)
		}
	}
}
