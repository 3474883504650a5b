package dnstraffic

import (
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
)

// BenchmarkAnswer is the per-query cost without I/O: a hit with three
// addresses, in a snapshot of 1000 hosts.
func BenchmarkAnswer(b *testing.B) {
	var mcis []*networkingv1alpha1.MultiClusterIngress
	for i := range 1000 {
		mcis = append(mcis, newMCI(fmt.Sprint(i), []string{fmt.Sprintf("h%d.example.com", i)}, "10.0.0.1", "10.0.0.2", "2001:db8::1"))
	}
	snap, _ := NewSnapshot(mcis, []string{"example.com."}, 5*time.Second, DomainRules{})
	for _, bc := range []struct {
		name    string
		qname   string
		rcode   int
		answers int
	}{{"hit", "h500.example.com.", dns.RcodeSuccess, 2}, {"nxdomain", "nope.example.com.", dns.RcodeNameError, 0}} {
		b.Run(bc.name, func(b *testing.B) {
			req := query(bc.qname, dns.TypeA)
			if resp := snap.Answer(req); resp.Rcode != bc.rcode || len(resp.Answer) != bc.answers {
				b.Fatalf("benchmarking the wrong path: %v", resp)
			}
			b.ReportAllocs()
			for b.Loop() {
				resp := snap.Answer(req)
				resp.Truncate(512)
				if _, err := resp.Pack(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBuildSnapshot is the cost of one rebuild for 1000 MCIs.
func BenchmarkBuildSnapshot(b *testing.B) {
	var mcis []*networkingv1alpha1.MultiClusterIngress
	for i := range 1000 {
		mcis = append(mcis, newMCI(fmt.Sprint(i), []string{fmt.Sprintf("h%d.example.com", i)}, "10.0.0.1", "10.0.0.2", "2001:db8::1"))
	}
	b.ReportAllocs()
	for b.Loop() {
		NewSnapshot(mcis, nil, 5*time.Second, DomainRules{})
	}
}
