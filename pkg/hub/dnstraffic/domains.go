package dnstraffic

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-io/flotilla/pkg/hostnames"
)

// DomainRules say which namespaces may claim the hosts within which domains
// (the hub's --ingress-host-namespaces). A host is governed by the rule of
// the longest domain it is within ("example.com" governs example.com,
// a.example.com and *.example.com); a host no rule governs may be claimed
// from any namespace. The zero value has no rule: every namespace may claim
// every host, the oldest claimant winning (Owners).
type DomainRules struct {
	// rules are sorted longest domain first, so the first match is the
	// longest.
	rules []domainRule
	// Subtrees (--ingress-host-subtree-ownership): the owner of an exact
	// host also owns every name strictly beneath it, wildcards included,
	// against claimants of other namespaces (same-namespace nesting is
	// fine). Needed when a provider answers a name with the records of the
	// names beneath it (ExternalDNS's CoreDNS/etcd provider does), so that
	// no other owner's addresses reach an exact host's answer.
	Subtrees bool
}

type domainRule struct {
	domain     string
	namespaces []string // sorted
}

// ParseDomainRules reads rules written "DOMAIN=NAMESPACE[,NAMESPACE...]",
// e.g. "example.com=team-a,team-b". An empty namespace list reserves the
// domain: no namespace may claim a host within it. A domain given twice is
// an error, so no rule silently replaces another.
func ParseDomainRules(specs []string) (DomainRules, error) {
	var r DomainRules
	for _, spec := range specs {
		domain, list, ok := strings.Cut(spec, "=")
		if !ok {
			return DomainRules{}, fmt.Errorf("%q: want DOMAIN=NAMESPACE[,NAMESPACE...]", spec)
		}
		d, err := hostnames.Canonical(domain)
		if err != nil || hostnames.IsWildcard(d) {
			return DomainRules{}, fmt.Errorf("%q: domain %q is not a DNS name (a domain covers the names under it: write example.com, not *.example.com)", spec, domain)
		}
		var namespaces []string
		for _, ns := range strings.Split(list, ",") {
			if ns = strings.TrimSpace(ns); ns == "" {
				continue
			}
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return DomainRules{}, fmt.Errorf("%q: namespace %q: %s", spec, ns, strings.Join(errs, "; "))
			}
			namespaces = append(namespaces, ns)
		}
		if slices.ContainsFunc(r.rules, func(x domainRule) bool { return x.domain == d }) {
			return DomainRules{}, fmt.Errorf("%q: domain %s has a rule already", spec, d)
		}
		slices.Sort(namespaces)
		r.rules = append(r.rules, domainRule{domain: d, namespaces: slices.Compact(namespaces)})
	}
	slices.SortFunc(r.rules, func(a, b domainRule) int {
		return cmp.Or(cmp.Compare(len(b.domain), len(a.domain)), cmp.Compare(a.domain, b.domain))
	})
	return r, nil
}

// Allows says whether namespace may claim host (canonical, as HostKeys
// returns it), and the domain of the rule that decided ("" when none
// governs host).
func (r DomainRules) Allows(namespace, host string) (bool, string) {
	for _, rule := range r.rules {
		if hostnames.Within(host, rule.domain) {
			_, ok := slices.BinarySearch(rule.namespaces, namespace)
			return ok, rule.domain
		}
	}
	return true, ""
}

// String is the rules as the flag takes them, longest domain first.
func (r DomainRules) String() string {
	parts := make([]string, 0, len(r.rules))
	for _, rule := range r.rules {
		parts = append(parts, rule.domain+"="+strings.Join(rule.namespaces, ","))
	}
	return strings.Join(parts, " ")
}
