package dnsprobe

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// serve runs a real UDP DNS server (miekg/dns) on loopback with handler.
func serve(t *testing.T, handler dns.HandlerFunc) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: handler}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

func answer(rrs ...string) dns.HandlerFunc {
	return func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for _, s := range rrs {
			rr, err := dns.NewRR(s)
			if err != nil {
				panic(err)
			}
			if rr.Header().Rrtype == r.Question[0].Qtype {
				m.Answer = append(m.Answer, rr)
			}
		}
		_ = w.WriteMsg(m)
	}
}

func rcode(code int) dns.HandlerFunc {
	return func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetRcode(r, code)
		_ = w.WriteMsg(m)
	}
}

func TestProbe(t *testing.T) {
	name := ProbeName("cluster.local")
	cases := []struct {
		name        string
		handler     dns.HandlerFunc
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{"A record", answer(name + " 5 IN A 10.0.0.1"), metav1.ConditionTrue, ReasonResolved, "10.0.0.1"},
		{"IPv6-only cluster", answer(name + " 5 IN AAAA fd00::1"), metav1.ConditionTrue, ReasonResolved, "fd00::1"},
		{"NXDOMAIN", rcode(dns.RcodeNameError), metav1.ConditionFalse, ReasonNameNotFound, "NXDOMAIN"},
		{"SERVFAIL", rcode(dns.RcodeServerFailure), metav1.ConditionFalse, ReasonServerFailure, "SERVFAIL"},
		{"REFUSED", rcode(dns.RcodeRefused), metav1.ConditionFalse, ReasonServerFailure, "REFUSED"},
		{"answer without an address", answer(name + " 5 IN TXT \"hello\""), metav1.ConditionFalse, ReasonNoAddress, "no AAAA record"},
		{"truncated", func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			m.SetReply(r)
			m.Truncated = true
			_ = w.WriteMsg(m)
		}, metav1.ConditionFalse, ReasonTruncated, "truncated"},
		{"garbage", func(w dns.ResponseWriter, r *dns.Msg) {
			// The query's ID, then bytes that are no DNS message.
			_, _ = w.Write([]byte{byte(r.Id >> 8), byte(r.Id), 0x81, 0x80, 0, 1, 0, 9, 0xff, 0xff, 0xff})
		}, metav1.ConditionFalse, ReasonMalformed, name},
		{"silence", func(dns.ResponseWriter, *dns.Msg) {}, metav1.ConditionFalse, ReasonTimeout, "no answer within"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			server := serve(t, tc.handler)
			got := Probe(context.Background(), server, name, 300*time.Millisecond)
			if got.Status != tc.wantStatus || got.Reason != tc.wantReason || !strings.Contains(got.Message, tc.wantMessage) {
				t.Fatalf("got %+v, want %s/%s with message containing %q", got, tc.wantStatus, tc.wantReason, tc.wantMessage)
			}
		})
	}
}

func TestProbeResolverDown(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close() // nothing listens: the kernel answers port unreachable
	got := Probe(context.Background(), addr, ProbeName("cluster.local"), 300*time.Millisecond)
	if got.Status != metav1.ConditionFalse || (got.Reason != ReasonResolverUnreachable && got.Reason != ReasonTimeout) {
		t.Fatalf("got %+v, want False/ResolverUnreachable", got)
	}
}

// FuzzProbeReply feeds arbitrary bytes back as the reply: the probe must
// return a verdict, never panic.
func FuzzProbeReply(f *testing.F) {
	f.Add([]byte{0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, payload []byte) {
		server := serve(t, func(w dns.ResponseWriter, r *dns.Msg) {
			_, _ = w.Write(append([]byte{byte(r.Id >> 8), byte(r.Id)}, payload...))
		})
		got := Probe(context.Background(), server, ProbeName("cluster.local"), 200*time.Millisecond)
		if got.Reason == "" {
			t.Fatalf("verdict without a reason: %+v", got)
		}
	})
}
