package dnstraffic

import (
	"testing"

	"github.com/miekg/dns"
	dto "github.com/prometheus/client_model/go"
)

// TestTableCountsHostsWithoutAddresses: hosts whose MCI has no address
// (no backend, or every backend cluster blocked) are counted, and their
// queries are the empty answers the gauge warns about.
func TestTableCountsHostsWithoutAddresses(t *testing.T) {
	s := newHandlerOnly(t, Options{},
		newMCI("team-a/web", []string{"web.example.com", "*.apps.example.com"}),
		newMCI("team-b/api", []string{"api.example.com"}, "10.0.0.2"))
	var d dto.Metric
	if err := s.metrics.HostsWithoutAddresses.Write(&d); err != nil {
		t.Fatal(err)
	}
	if got := d.GetGauge().GetValue(); got != 2 {
		t.Errorf("hosts_without_addresses %v, want 2 (web and *.apps)", got)
	}
	w := &fakeWriter{}
	s.ServeDNS(w, query("web.example.com.", dns.TypeA))
	if m := w.msgs[0]; m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 {
		t.Errorf("web.example.com: rcode %d, %d answers; want NOERROR and none", m.Rcode, len(m.Answer))
	}
}
