package dnstraffic

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
)

// claim is an MCI "ns/name" created at minute age claiming hosts, with one
// address of its own.
type claim struct {
	ref   string
	age   int
	hosts []string
	addr  string
}

func (c claim) mci() *networkingv1alpha1.MultiClusterIngress {
	ns, name, _ := strings.Cut(c.ref, "/")
	m := newMCI(name, c.hosts, c.addr)
	m.Namespace = ns
	m.CreationTimestamp = metav1.NewTime(time.Date(2024, 1, 1, 0, c.age, 0, 0, time.UTC))
	return m
}

func mcisOf(claims []claim) []*networkingv1alpha1.MultiClusterIngress {
	var out []*networkingv1alpha1.MultiClusterIngress
	for _, c := range claims {
		out = append(out, c.mci())
	}
	return out
}

func conflictStrings(cs []HostConflict) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Host+" owned by "+c.Owner.String())
	}
	return out
}

// TestOwners: the oldest claimant owns a host, ties go by namespace then
// name, a wildcard and an exact host are different names, and what the DNS
// answers follows the same decision.
func TestOwners(t *testing.T) {
	tests := []struct {
		name   string
		claims []claim
		// conflicts by claimant ref, "host owned by ns/name".
		conflicts map[string][]string
		contested int
		// answers: qname → A records served.
		answers map[string][]string
	}{
		{
			name: "newer claimant in another namespace loses",
			claims: []claim{
				{"team-b/web", 2, []string{"web.example.com"}, "10.0.0.2"},
				{"team-a/web", 1, []string{"web.example.com"}, "10.0.0.1"},
			},
			conflicts: map[string][]string{"team-b/web": {"web.example.com owned by team-a/web"}},
			contested: 1,
			answers:   map[string][]string{"web.example.com.": {"10.0.0.1"}},
		},
		{
			name: "case and trailing-dot variants are the same host",
			claims: []claim{
				{"team-a/web", 1, []string{"web.example.com"}, "10.0.0.1"},
				{"team-b/web", 2, []string{"WEB.Example.COM."}, "10.0.0.2"},
				{"team-c/web", 3, []string{"web.example.com."}, "10.0.0.3"},
			},
			conflicts: map[string][]string{
				"team-b/web": {"web.example.com owned by team-a/web"},
				"team-c/web": {"web.example.com owned by team-a/web"},
			},
			contested: 1,
			answers:   map[string][]string{"web.example.com.": {"10.0.0.1"}, "WEB.EXAMPLE.COM.": {"10.0.0.1"}},
		},
		{
			name: "equal creation times: namespace, then name, decides",
			claims: []claim{
				{"team-b/a", 1, []string{"web.example.com"}, "10.0.0.2"},
				{"team-a/z", 1, []string{"web.example.com"}, "10.0.0.1"},
				{"team-a/y", 1, []string{"api.example.com"}, "10.0.0.3"},
				{"team-a/x", 1, []string{"api.example.com"}, "10.0.0.4"},
			},
			conflicts: map[string][]string{
				"team-b/a": {"web.example.com owned by team-a/z"},
				"team-a/y": {"api.example.com owned by team-a/x"},
			},
			contested: 2,
			answers:   map[string][]string{"web.example.com.": {"10.0.0.1"}, "api.example.com.": {"10.0.0.4"}},
		},
		{
			name: "an older wildcard does not capture an exact host owned elsewhere",
			claims: []claim{
				{"team-c/wild", 1, []string{"*.example.com"}, "10.0.0.3"},
				{"team-a/web", 2, []string{"web.example.com"}, "10.0.0.1"},
			},
			answers: map[string][]string{"web.example.com.": {"10.0.0.1"}, "other.example.com.": {"10.0.0.3"}},
		},
		{
			name: "a newer wildcard does not capture an exact host owned elsewhere",
			claims: []claim{
				{"team-a/web", 1, []string{"web.example.com"}, "10.0.0.1"},
				{"team-c/wild", 2, []string{"*.example.com"}, "10.0.0.3"},
			},
			answers: map[string][]string{"web.example.com.": {"10.0.0.1"}, "other.example.com.": {"10.0.0.3"}},
		},
		{
			name: "two wildcards over one suffix: the oldest wins, whatever the spelling",
			claims: []claim{
				{"team-d/wild", 2, []string{"*.Example.com."}, "10.0.0.4"},
				{"team-c/wild", 1, []string{"*.example.com"}, "10.0.0.3"},
			},
			conflicts: map[string][]string{"team-d/wild": {"*.example.com owned by team-c/wild"}},
			contested: 1,
			answers:   map[string][]string{"x.example.com.": {"10.0.0.3"}, "*.example.com.": {"10.0.0.3"}},
		},
		{
			name: "a wildcard over a host's subdomains is not a claim on the host",
			claims: []claim{
				{"team-a/web", 1, []string{"web.example.com"}, "10.0.0.1"},
				{"team-b/sub", 2, []string{"*.web.example.com"}, "10.0.0.2"},
			},
			answers: map[string][]string{"web.example.com.": {"10.0.0.1"}, "x.web.example.com.": {"10.0.0.2"}},
		},
		{
			name: "a loser keeps the hosts nobody else claims",
			claims: []claim{
				{"team-a/web", 1, []string{"web.example.com"}, "10.0.0.1"},
				{"team-b/web", 2, []string{"web.example.com", "b.example.com", "web.example.com"}, "10.0.0.2"},
			},
			conflicts: map[string][]string{"team-b/web": {"web.example.com owned by team-a/web"}},
			contested: 1,
			answers:   map[string][]string{"web.example.com.": {"10.0.0.1"}, "b.example.com.": {"10.0.0.2"}},
		},
		{
			name: "conflicts are listed by host, each with its owner",
			claims: []claim{
				{"team-a/web", 1, []string{"web.example.com"}, "10.0.0.1"},
				{"team-x/api", 2, []string{"api.example.com"}, "10.0.0.5"},
				{"team-b/all", 3, []string{"web.example.com", "api.example.com", "*.example.com"}, "10.0.0.2"},
			},
			conflicts: map[string][]string{"team-b/all": {"api.example.com owned by team-x/api", "web.example.com owned by team-a/web"}},
			contested: 2,
			answers:   map[string][]string{"web.example.com.": {"10.0.0.1"}, "api.example.com.": {"10.0.0.5"}, "z.example.com.": {"10.0.0.2"}},
		},
		{
			name: "an ingress listing its host twice is no conflict",
			claims: []claim{
				{"team-a/web", 1, []string{"web.example.com", "Web.example.com."}, "10.0.0.1"},
			},
			answers: map[string][]string{"web.example.com.": {"10.0.0.1"}},
		},
		{
			name: "IDN: a U-label and its A-label are one host, whoever spells it which way",
			claims: []claim{
				{"team-b/idn", 1, []string{"bücher.example.com"}, "10.0.0.2"},
				{"team-a/idn", 2, []string{"xn--bcher-kva.example.com"}, "10.0.0.1"},
				{"team-c/idn", 3, []string{"XN--BCHER-KVA.example.com", "BÜCHER.example.com."}, "10.0.0.3"},
			},
			conflicts: map[string][]string{
				"team-a/idn": {"xn--bcher-kva.example.com owned by team-b/idn"},
				"team-c/idn": {"xn--bcher-kva.example.com owned by team-b/idn"},
			},
			contested: 1,
			answers:   map[string][]string{"xn--bcher-kva.example.com.": {"10.0.0.2"}},
		},
		{
			name: "any number of trailing dots, whitespace and escapes spell the same host",
			claims: []claim{
				{"team-a/web", 1, []string{"web.example.com"}, "10.0.0.1"},
				{"team-b/web", 2, []string{"web.example.com.."}, "10.0.0.2"},
				{"team-c/web", 3, []string{" web.example.com... "}, "10.0.0.3"},
				{"team-d/web", 4, []string{`w\101b.example.com`, `\087EB.example.com.`}, "10.0.0.4"},
			},
			conflicts: map[string][]string{
				"team-b/web": {"web.example.com owned by team-a/web"},
				"team-c/web": {"web.example.com owned by team-a/web"},
				"team-d/web": {"web.example.com owned by team-a/web"},
			},
			contested: 1,
			answers:   map[string][]string{"web.example.com.": {"10.0.0.1"}},
		},
		{
			name: "a wildcard answers any depth of names that do not exist, never one that does (RFC 4592)",
			claims: []claim{
				{"team-c/wild", 1, []string{"*.example.com"}, "10.0.0.3"},
				{"team-a/deep", 2, []string{"a.b.example.com"}, "10.0.0.1"},
			},
			answers: map[string][]string{"x.y.example.com.": {"10.0.0.3"}, "a.b.example.com.": {"10.0.0.1"}, "b.example.com.": nil},
		},
		{
			name: "a host without a serving cluster is NODATA, never another owner's wildcard",
			claims: []claim{
				{"team-c/wild", 1, []string{"*.example.com"}, "10.0.0.3"},
				{"team-a/web", 2, []string{"web.example.com"}, ""},
				{"team-d/wild", 3, []string{"*.web.example.com"}, "10.0.0.4"},
			},
			answers: map[string][]string{"web.example.com.": nil, "x.example.com.": {"10.0.0.3"}, "x.web.example.com.": {"10.0.0.4"}},
		},
		{
			name: "catch-all rules and invalid hosts claim nothing",
			claims: []claim{
				{"team-b/any", 1, []string{"", "bad host!", "a.*.example.com", "*"}, "10.0.0.2"},
				{"team-a/web", 2, []string{"web.example.com"}, "10.0.0.1"},
			},
			answers: map[string][]string{"web.example.com.": {"10.0.0.1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mcis := mcisOf(tt.claims)
			o := Owners(mcis, DomainRules{})
			for _, c := range tt.claims {
				ns, name, _ := strings.Cut(c.ref, "/")
				got := conflictStrings(o.Conflicts(IngressRef{ns, name}))
				if want := tt.conflicts[c.ref]; !slices.Equal(got, want) {
					t.Errorf("conflicts of %s: %q, want %q", c.ref, got, want)
				}
			}
			if o.Contested() != tt.contested {
				t.Errorf("contested %d, want %d", o.Contested(), tt.contested)
			}
			// The order of the list never matters.
			rev := slices.Clone(mcis)
			slices.Reverse(rev)
			for _, c := range tt.claims {
				ns, name, _ := strings.Cut(c.ref, "/")
				ref := IngressRef{ns, name}
				if a, b := conflictStrings(o.Conflicts(ref)), conflictStrings(Owners(rev, DomainRules{}).Conflicts(ref)); !slices.Equal(a, b) {
					t.Errorf("conflicts of %s depend on list order: %q vs %q", c.ref, a, b)
				}
			}

			snap, _ := NewSnapshot(mcis, nil, 5*time.Second, DomainRules{})
			for qname, want := range tt.answers {
				resp := snap.Answer(query(qname, dns.TypeA))
				var got []string
				for _, rr := range resp.Answer {
					got = append(got, rr.(*dns.A).A.String())
				}
				if resp.Rcode != dns.RcodeSuccess || !slices.Equal(got, want) {
					t.Errorf("%s: rcode %s answers %v, want %v", qname, dns.RcodeToString[resp.Rcode], got, want)
				}
			}
		})
	}
}

// TestOwnersNextOldestTakesOver: deleting the owner hands the host to the
// next-oldest claimant, in the decision and in the answers; re-creating
// the old owner makes it the newest, so it does not win the host back.
func TestOwnersNextOldestTakesOver(t *testing.T) {
	a := claim{"team-a/web", 1, []string{"web.example.com"}, "10.0.0.1"}
	b := claim{"team-b/web", 2, []string{"web.example.com"}, "10.0.0.2"}
	c := claim{"team-c/web", 3, []string{"web.example.com"}, "10.0.0.3"}
	served := func(claims ...claim) []string {
		snap, _ := NewSnapshot(mcisOf(claims), nil, time.Second, DomainRules{})
		return addrsOf(snap.Answer(query("web.example.com.", dns.TypeA)))
	}
	if got := served(a, b, c); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Fatalf("with a, b, c: %v", got)
	}
	if got := served(b, c); !slices.Equal(got, []string{"10.0.0.2"}) {
		t.Fatalf("a deleted: %v, want b's", got)
	}
	if got := conflictStrings(Owners(mcisOf([]claim{b, c}), DomainRules{}).Conflicts(IngressRef{"team-c", "web"})); !slices.Equal(got, []string{"web.example.com owned by team-b/web"}) {
		t.Fatalf("a deleted: c's conflicts %q", got)
	}
	a.age = 4 // re-created: the apiserver stamps it now
	if got := served(a, b, c); !slices.Equal(got, []string{"10.0.0.2"}) {
		t.Fatalf("a re-created: %v, want b's still", got)
	}
}

// TestOwnersOfClaimantsOnly: the ingress controller decides an ingress's
// hosts from the ingresses sharing one of them, not from all; that must
// give what the DNS table decides from all of them.
func TestOwnersOfClaimantsOnly(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	hosts := []string{"a.example.com", "B.example.com", "b.example.com.", "*.example.com", "*.a.example.com", "c.example.org", "", "bad!"}
	for round := range 200 {
		var mcis []*networkingv1alpha1.MultiClusterIngress
		for i := range 1 + rng.Intn(12) {
			var hs []string
			for range rng.Intn(4) {
				hs = append(hs, hosts[rng.Intn(len(hosts))])
			}
			c := claim{fmt.Sprintf("ns-%d/mci-%d", rng.Intn(3), i), rng.Intn(4), hs, ""}
			mcis = append(mcis, c.mci())
		}
		all := Owners(mcis, DomainRules{})
		for _, m := range mcis {
			keys, _ := HostKeys(&m.Spec.IngressSpec)
			var claimants []*networkingv1alpha1.MultiClusterIngress
			for _, other := range mcis {
				otherKeys, _ := HostKeys(&other.Spec.IngressSpec)
				if slices.ContainsFunc(otherKeys, func(k string) bool { return slices.Contains(keys, k) }) {
					claimants = append(claimants, other)
				}
			}
			ref := RefOf(m)
			if a, b := conflictStrings(all.Conflicts(ref)), conflictStrings(Owners(claimants, DomainRules{}).Conflicts(ref)); !slices.Equal(a, b) {
				t.Fatalf("round %d: %s: from all %q, from its claimants %q", round, ref, a, b)
			}
			for _, k := range keys {
				if all.Owns(ref, k) != Owners(claimants, DomainRules{}).Owns(ref, k) {
					t.Fatalf("round %d: %s owns %s: decisions differ", round, ref, k)
				}
			}
		}
	}
}

func TestHostKeys(t *testing.T) {
	m := newMCI("x", []string{"Web.Example.com.", "", "web.example.com", "web.example.com..", " web.example.com ", "*.Apps.example.com", "bücher.example.com",
		"a.*.b", "xn--bcher-kva.example.com", "web_1.example.com", "web_1.example.com"})
	keys, invalid := HostKeys(&m.Spec.IngressSpec)
	if want := []string{"*.apps.example.com", "web.example.com", "xn--bcher-kva.example.com"}; !slices.Equal(keys, want) {
		t.Errorf("keys %q, want %q", keys, want)
	}
	if want := []string{"a.*.b", "web_1.example.com"}; !slices.Equal(invalid, want) {
		t.Errorf("invalid %q, want %q", invalid, want)
	}
}

// TestTableCountsHostConflicts: the table's gauge counts the hosts claimed
// by more than one MCI.
func TestTableCountsHostConflicts(t *testing.T) {
	objs := mcisOf([]claim{
		{"team-a/web", 1, []string{"web.example.com", "*.example.com"}, "10.0.0.1"},
		{"team-b/web", 2, []string{"web.example.com"}, "10.0.0.2"},
		{"team-c/web", 3, []string{"WEB.example.com.", "*.example.com", "c.example.com"}, "10.0.0.3"},
	})
	s := newHandlerOnly(t, Options{}, objs[0], objs[1], objs[2])
	var d dto.Metric
	if err := s.metrics.HostConflicts.Write(&d); err != nil {
		t.Fatal(err)
	}
	if got := d.GetGauge().GetValue(); got != 2 {
		t.Errorf("host_conflicts %v, want 2", got)
	}
	w := &fakeWriter{}
	s.ServeDNS(w, query("web.example.com.", dns.TypeA))
	if got := addrsOf(w.msgs[0]); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Errorf("web.example.com answers %v, want the owner's only", got)
	}
}

// TestOwnersDomainRules: with --ingress-host-namespaces, a claimant whose
// namespace may not claim a host never owns it and never keeps an allowed
// one, older or newer, from owning it; the longest matching domain's rule
// applies; a host no rule governs is anyone's, oldest first.
func TestOwnersDomainRules(t *testing.T) {
	rules, err := ParseDomainRules([]string{"example.com=team-a,team-b", "secure.example.com=team-s", "reserved.example.com="})
	if err != nil {
		t.Fatal(err)
	}
	claims := []claim{
		{"team-x/web", 1, []string{"web.example.com", "*.example.com", "x.example.org"}, "10.0.0.9"}, // oldest, not allowed under example.com
		{"team-b/web", 2, []string{"WEB.example.com."}, "10.0.0.2"},
		{"team-a/web", 3, []string{"web.example.com", "*.example.com", "a.secure.example.com"}, "10.0.0.1"},
		{"team-s/sec", 4, []string{"a.secure.example.com", "*.secure.example.com", "shop.example.com"}, "10.0.0.5"},
		{"team-a/res", 5, []string{"reserved.example.com", "x.reserved.example.com"}, "10.0.0.6"},
		{"team-y/org", 6, []string{"x.example.org"}, "10.0.0.7"},
	}
	o := Owners(mcisOf(claims), rules)
	notAllowed := func(ref string) []string {
		ns, name, _ := strings.Cut(ref, "/")
		var out []string
		for _, na := range o.NotAllowed(IngressRef{ns, name}) {
			out = append(out, na.Host+" within "+na.Domain)
		}
		return out
	}
	for ref, want := range map[string][]string{
		"team-x/web": {"*.example.com within example.com", "web.example.com within example.com"},
		"team-b/web": nil,
		"team-a/web": {"a.secure.example.com within secure.example.com"},
		"team-s/sec": {"shop.example.com within example.com"},
		"team-a/res": {"reserved.example.com within reserved.example.com", "x.reserved.example.com within reserved.example.com"},
		"team-y/org": nil,
	} {
		if got := notAllowed(ref); !slices.Equal(got, want) {
			t.Errorf("not allowed for %s: %q, want %q", ref, got, want)
		}
	}
	// team-x is oldest but may not claim web.example.com: team-b, the
	// oldest allowed claimant, owns it and team-a conflicts with team-b
	// only; a host no rule governs goes by age as before.
	for ref, want := range map[string][]string{
		"team-x/web": nil,
		"team-b/web": nil,
		"team-a/web": {"web.example.com owned by team-b/web"},
		"team-y/org": {"x.example.org owned by team-x/web"},
	} {
		ns, name, _ := strings.Cut(ref, "/")
		if got := conflictStrings(o.Conflicts(IngressRef{ns, name})); !slices.Equal(got, want) {
			t.Errorf("conflicts of %s: %q, want %q", ref, got, want)
		}
	}
	snap, ignored := NewSnapshot(mcisOf(claims), []string{"example.com.", "example.org."}, time.Second, rules)
	for qname, want := range map[string][]string{
		"web.example.com.":        {"10.0.0.2"},
		"anything.example.com.":   {"10.0.0.1"}, // team-a's wildcard, not team-x's older one
		"a.secure.example.com.":   {"10.0.0.5"},
		"b.secure.example.com.":   {"10.0.0.5"},
		"shop.example.com.":       {"10.0.0.1"}, // team-s may not claim it: no such host, the wildcard answers
		"reserved.example.com.":   {"10.0.0.1"}, // claimed by nobody allowed
		"x.example.org.":          {"10.0.0.9"},
		"x.reserved.example.com.": {"10.0.0.1"},
	} {
		if got := addrsOf(snap.Answer(query(qname, dns.TypeA))); !slices.Equal(got, want) {
			t.Errorf("%s answers %v, want %v", qname, got, want)
		}
	}
	if !slices.ContainsFunc(ignored, func(ig IgnoredHost) bool {
		return ig.Host == "web.example.com" && strings.Contains(ig.Reason, "team-x/web") && strings.Contains(ig.Reason, "within example.com")
	}) {
		t.Errorf("team-x's web.example.com is not logged as not allowed: %v", ignored)
	}
	// Without rules, the oldest claimant owns, whatever its namespace.
	if got := conflictStrings(Owners(mcisOf(claims), DomainRules{}).Conflicts(IngressRef{"team-b", "web"})); !slices.Equal(got, []string{"web.example.com owned by team-x/web"}) {
		t.Errorf("without rules: team-b's conflicts %q", got)
	}
}

func TestParseDomainRules(t *testing.T) {
	r, err := ParseDomainRules([]string{"Example.COM.=team-b, team-a,team-a", "a.example.com=team-c", "x.org="})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.String(), "a.example.com=team-c example.com=team-a,team-b x.org="; got != want {
		t.Errorf("rules %q, want %q", got, want)
	}
	for _, tc := range []struct {
		ns, host, domain string
		ok               bool
	}{
		{"team-a", "example.com", "example.com", true},
		{"team-b", "*.example.com", "example.com", true},
		{"team-c", "b.example.com", "example.com", false},
		{"team-c", "x.a.example.com", "a.example.com", true},
		{"team-a", "a.example.com", "a.example.com", false},
		{"team-a", "badexample.com", "", true},
		{"team-a", "x.org", "x.org", false},
	} {
		if ok, domain := r.Allows(tc.ns, tc.host); ok != tc.ok || domain != tc.domain {
			t.Errorf("Allows(%s, %s) = %v, %q; want %v, %q", tc.ns, tc.host, ok, domain, tc.ok, tc.domain)
		}
	}
	for _, bad := range [][]string{{"example.com"}, {"*.example.com=a"}, {"exa mple.com=a"}, {"example.com=Team_A"}, {"example.com=a", "EXAMPLE.com.=b"}} {
		if _, err := ParseDomainRules(bad); err == nil {
			t.Errorf("ParseDomainRules(%q): want an error", bad)
		}
	}
}

// TestOwnersSubtrees: with DomainRules.Subtrees, a claim strictly beneath
// an exact host owned in another namespace loses to that owner, whatever
// its age; nesting in one namespace is fine; only an owned ancestor
// counts; without the option nothing changes.
func TestOwnersSubtrees(t *testing.T) {
	rulesOf := func(t *testing.T, subtrees bool, specs ...string) DomainRules {
		r, err := ParseDomainRules(specs)
		if err != nil {
			t.Fatal(err)
		}
		r.Subtrees = subtrees
		return r
	}
	tests := []struct {
		name      string
		subtrees  bool
		domains   []string
		claims    []claim
		conflicts map[string][]string // by claimant ref
		contested int
	}{
		{name: "nested in another namespace, newer: conflict", subtrees: true,
			claims:    []claim{{"team-a/web", 1, []string{"web.example.com"}, ""}, {"team-x/x", 2, []string{"x.web.example.com"}, ""}},
			conflicts: map[string][]string{"team-x/x": {"x.web.example.com owned by team-a/web above web.example.com"}}, contested: 1},
		{name: "nested in another namespace, older: conflict too", subtrees: true,
			claims:    []claim{{"team-a/web", 2, []string{"web.example.com"}, ""}, {"team-x/x", 1, []string{"x.web.example.com", "other.example.org"}, ""}},
			conflicts: map[string][]string{"team-x/x": {"x.web.example.com owned by team-a/web above web.example.com"}}, contested: 1},
		{name: "a wildcard beneath is beneath; deep names too", subtrees: true,
			claims:    []claim{{"team-a/web", 1, []string{"web.example.com"}, ""}, {"team-x/x", 2, []string{"*.web.example.com", "a.b.web.example.com"}, ""}},
			conflicts: map[string][]string{"team-x/x": {"*.web.example.com owned by team-a/web above web.example.com", "a.b.web.example.com owned by team-a/web above web.example.com"}}, contested: 2},
		{name: "same namespace nesting is fine", subtrees: true,
			claims: []claim{{"team-a/web", 1, []string{"web.example.com"}, ""}, {"team-a/x", 2, []string{"x.web.example.com"}, ""}}},
		{name: "a wildcard owns no subtree", subtrees: true,
			claims: []claim{{"team-a/web", 1, []string{"*.example.com"}, ""}, {"team-x/x", 2, []string{"x.example.com", "a.x.example.com"}, ""}}},
		{name: "the nearest owned ancestor is named", subtrees: true,
			claims:    []claim{{"team-a/top", 1, []string{"example.com"}, ""}, {"team-a/web", 2, []string{"web.example.com"}, ""}, {"team-x/x", 3, []string{"x.web.example.com"}, ""}},
			conflicts: map[string][]string{"team-x/x": {"x.web.example.com owned by team-a/web above web.example.com"}}, contested: 1},
		{name: "an ancestor claim that lost blocks no one beneath", subtrees: true,
			// team-x's web.example.com loses to team-a's example.com, so it
			// owns nothing and team-x/deep is judged by example.com only.
			claims:    []claim{{"team-a/top", 1, []string{"example.com"}, ""}, {"team-x/web", 2, []string{"web.example.com"}, ""}, {"team-a/deep", 3, []string{"x.web.example.com"}, ""}},
			conflicts: map[string][]string{"team-x/web": {"web.example.com owned by team-a/top above example.com"}}, contested: 1},
		{name: "a disallowed ancestor claim blocks no one", subtrees: true, domains: []string{"web.example.com=team-x"},
			claims:    []claim{{"team-a/web", 1, []string{"example.com", "web.example.com"}, ""}, {"team-x/x", 2, []string{"x.web.example.com"}, ""}},
			conflicts: map[string][]string{"team-x/x": {"x.web.example.com owned by team-a/web above example.com"}}, contested: 1},
		{name: "a disallowed claimant beneath is not allowed, not in conflict", subtrees: true, domains: []string{"x.web.example.com=team-y"},
			claims: []claim{{"team-a/web", 1, []string{"web.example.com"}, ""}, {"team-x/x", 2, []string{"x.web.example.com"}, ""}}},
		{name: "same host: the oldest still owns it, the loser names it", subtrees: true,
			claims:    []claim{{"team-a/web", 1, []string{"web.example.com"}, ""}, {"team-x/web", 2, []string{"web.example.com"}, ""}},
			conflicts: map[string][]string{"team-x/web": {"web.example.com owned by team-a/web"}}, contested: 1},
		{name: "option off: today's behaviour, nesting across namespaces is fine", subtrees: false,
			claims: []claim{{"team-a/web", 1, []string{"web.example.com"}, ""}, {"team-x/x", 2, []string{"x.web.example.com"}, ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mcis := mcisOf(tt.claims)
			o := Owners(mcis, rulesOf(t, tt.subtrees, tt.domains...))
			for _, m := range mcis {
				ref := RefOf(m)
				var got []string
				for _, c := range o.Conflicts(ref) {
					s := c.Host + " owned by " + c.Owner.String()
					if c.Above != "" {
						s += " above " + c.Above
					}
					got = append(got, s)
				}
				if !slices.Equal(got, tt.conflicts[ref.String()]) {
					t.Errorf("conflicts of %s = %q, want %q", ref, got, tt.conflicts[ref.String()])
				}
				keys, _ := HostKeys(&m.Spec.IngressSpec)
				for _, k := range keys {
					lost := slices.ContainsFunc(o.Conflicts(ref), func(c HostConflict) bool { return c.Host == k }) ||
						slices.ContainsFunc(o.NotAllowed(ref), func(n HostNotAllowed) bool { return n.Host == k })
					if o.Owns(ref, k) == lost {
						t.Errorf("%s: owns %s = %v, but lost it = %v", ref, k, o.Owns(ref, k), lost)
					}
				}
			}
			if o.Contested() != tt.contested {
				t.Errorf("Contested = %d, want %d", o.Contested(), tt.contested)
			}
			// Claimants' promise: Owners of a host's claimants and its
			// ancestors' decides it the same way as Owners of all.
			for _, m := range mcis {
				ref := RefOf(m)
				keys, _ := HostKeys(&m.Spec.IngressSpec)
				var sub []*networkingv1alpha1.MultiClusterIngress
				for _, other := range mcis {
					otherKeys, _ := HostKeys(&other.Spec.IngressSpec)
					if slices.ContainsFunc(otherKeys, func(ok string) bool {
						return slices.ContainsFunc(keys, func(k string) bool { return k == ok || slices.Contains(above(k), ok) })
					}) {
						sub = append(sub, other)
					}
				}
				so := Owners(sub, rulesOf(t, tt.subtrees, tt.domains...))
				if !slices.Equal(so.Conflicts(ref), o.Conflicts(ref)) {
					t.Errorf("%s: conflicts from its claimants %v, from all %v", ref, so.Conflicts(ref), o.Conflicts(ref))
				}
			}
		})
	}
}
