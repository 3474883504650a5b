package dnstraffic

import (
	"cmp"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hostnames"
)

// IngressRef names a MultiClusterIngress.
type IngressRef struct {
	Namespace, Name string
}

func (r IngressRef) String() string { return r.Namespace + "/" + r.Name }

// RefOf is the reference of mci.
func RefOf(mci *networkingv1alpha1.MultiClusterIngress) IngressRef {
	return IngressRef{Namespace: mci.Namespace, Name: mci.Name}
}

// HostConflict is a host an ingress claims that an older ingress owns.
type HostConflict struct {
	// Host is the claimed host, canonical (hostnames.Canonical:
	// "web.example.com", "*.example.com").
	Host string
	// Owner is the ingress whose addresses are served for Host, or, when
	// Above is set, the ingress whose exact host Above Host is beneath.
	Owner IngressRef
	// Above is the exact host, owned by Owner in another namespace, that
	// Host is strictly beneath (DomainRules.Subtrees); "" when Owner owns
	// Host itself.
	Above string
}

// HostNotAllowed is a host an ingress claims that its namespace may not
// (DomainRules).
type HostNotAllowed struct {
	// Host is the claimed host, canonical.
	Host string
	// Domain is the rule's domain: the longest one Host is within.
	Domain string
}

// HostKeys returns the hosts of spec as ownership keys: each host in its
// canonical form (hostnames.Canonical, so every spelling of one name is one
// key and every output publishes exactly the key), sorted and
// deduplicated, and the hosts, as written, that are not host names and so
// are never served. A rule without a host (a catch-all) names nothing.
func HostKeys(spec *networkingv1.IngressSpec) (keys, invalid []string) {
	for _, rule := range spec.Rules {
		if rule.Host == "" {
			continue
		}
		k, err := hostnames.Canonical(rule.Host)
		if err != nil {
			invalid = append(invalid, rule.Host)
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Sort(invalid)
	return slices.Compact(keys), slices.Compact(invalid)
}

// Ownership says which ingress owns each host. Build it with Owners; the
// DNS table and the ingress controller both do, so what is answered and
// what the status conditions say come from the same decision.
type Ownership struct {
	owner      map[string]IngressRef
	conflicts  map[IngressRef][]HostConflict
	notAllowed map[IngressRef][]HostNotAllowed
	contested  int
}

// Owners decides the owner of every host claimed by mcis: the oldest
// claimant (creationTimestamp, which the apiserver sets and never lets a
// client change; ties broken by namespace, then name) among those whose
// namespace rules allow the host. Only the owner's addresses are served for
// a host; every later allowed claimant gets a conflict, and a claimant its
// namespace may not make gets a HostNotAllowed instead: it never owns the
// host, nor keeps an allowed one, older or newer, from owning it.
//
// An exact host and a wildcard are different names: "*.example.com" owned
// by one ingress never captures "a.example.com" owned by another, because
// a name that exists wins over a wildcard in the answers (RFC 4592), and
// two wildcards over the same suffix are the same name, owned by the
// oldest.
//
// With rules.Subtrees, an exact host's owner also owns every name strictly
// beneath it against other namespaces: a claimant of such a name in
// another namespace gets a conflict naming that owner (HostConflict.Above),
// older or not. Only an ancestor that is itself owned counts, so a
// disallowed or losing claimant of an ancestor blocks no one.
//
// The owner of a host depends only on the ingresses that claim it or (with
// Subtrees) one of its ancestors, so Owners of any subset holding all of
// those decides that host the same way (Claimants gathers them; the
// ingress and DNSEndpoint controllers rely on this).
func Owners(mcis []*networkingv1alpha1.MultiClusterIngress, rules DomainRules) *Ownership {
	sorted := slices.Clone(mcis)
	slices.SortFunc(sorted, olderFirst)
	o := &Ownership{owner: map[string]IngressRef{}, conflicts: map[IngressRef][]HostConflict{}, notAllowed: map[IngressRef][]HostNotAllowed{}}
	// The allowed claimants of each host, oldest first.
	claimants := map[string][]IngressRef{}
	seen := map[IngressRef]bool{}
	for _, mci := range sorted {
		ref := RefOf(mci)
		if seen[ref] { // the same ingress listed twice in mcis claims once
			continue
		}
		seen[ref] = true
		keys, _ := HostKeys(&mci.Spec.IngressSpec)
		for _, k := range keys {
			if ok, domain := rules.Allows(ref.Namespace, k); !ok {
				o.notAllowed[ref] = append(o.notAllowed[ref], HostNotAllowed{Host: k, Domain: domain})
				continue
			}
			claimants[k] = append(claimants[k], ref)
		}
	}
	// Ancestors before the names beneath them (fewer labels first), so
	// with Subtrees an ancestor's owner is known, and only an ancestor that
	// is itself owned reserves its subtree.
	hosts := make([]string, 0, len(claimants))
	for k := range claimants {
		hosts = append(hosts, k)
	}
	slices.SortFunc(hosts, func(a, b string) int {
		return cmp.Or(cmp.Compare(strings.Count(a, "."), strings.Count(b, ".")), cmp.Compare(a, b))
	})
	for _, k := range hosts {
		var above string
		var aboveOwner IngressRef
		if rules.Subtrees {
			above, aboveOwner = o.ownedAncestor(k)
		}
		lost := false
		for _, ref := range claimants[k] {
			switch owner, taken := o.owner[k]; {
			case above != "" && aboveOwner.Namespace != ref.Namespace:
				o.conflicts[ref] = append(o.conflicts[ref], HostConflict{Host: k, Owner: aboveOwner, Above: above})
				lost = true
			case !taken:
				o.owner[k] = ref
			default:
				o.conflicts[ref] = append(o.conflicts[ref], HostConflict{Host: k, Owner: owner})
				lost = true
			}
		}
		if lost {
			o.contested++
		}
	}
	for _, c := range o.conflicts {
		slices.SortFunc(c, func(a, b HostConflict) int { return strings.Compare(a.Host, b.Host) })
	}
	return o
}

// ownedAncestor is the nearest exact host strictly above key that has an
// owner, and that owner. Every owned ancestor of a name is in one
// namespace under Subtrees, so the nearest is the one to name.
func (o *Ownership) ownedAncestor(key string) (string, IngressRef) {
	for parent := key; ; {
		_, rest, ok := strings.Cut(parent, ".")
		if !ok {
			return "", IngressRef{}
		}
		parent = rest
		if owner, ok := o.owner[parent]; ok {
			return parent, owner
		}
	}
}

// olderFirst orders ingresses oldest first, deterministically.
func olderFirst(a, b *networkingv1alpha1.MultiClusterIngress) int {
	return cmp.Or(a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time),
		cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// Owns says whether ref owns key (a key as HostKeys returns it).
func (o *Ownership) Owns(ref IngressRef, key string) bool {
	owner, ok := o.owner[key]
	return ok && owner == ref
}

// Conflicts are the hosts ref claims but an older ingress owns, sorted by
// host.
func (o *Ownership) Conflicts(ref IngressRef) []HostConflict {
	return slices.Clone(o.conflicts[ref])
}

// NotAllowed are the hosts ref claims that its namespace may not, sorted
// by host.
func (o *Ownership) NotAllowed(ref IngressRef) []HostNotAllowed {
	return slices.Clone(o.notAllowed[ref])
}

// Contested is the number of hosts some allowed claimant lost: claimed by
// more than one allowed ingress, or (Subtrees) beneath another
// namespace's exact host.
func (o *Ownership) Contested() int { return o.contested }
