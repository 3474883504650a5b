package dnstraffic

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	networkinglisters "github.com/flotilla-io/flotilla/pkg/generated/listers/networking/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hostnames"
)

// Snapshot is an immutable view of every MCI host and its addresses. It is
// replaced whole on change, so the query path reads it without locks.
type Snapshot struct {
	synced bool
	ttl    uint32
	serial uint32
	// zones are the apexes served, FQDN and lowercase.
	zones map[string]struct{}
	// names are the names that exist: hosts, their ancestors inside their
	// zone (empty non-terminals, so RFC 8020 resolvers do not prune a
	// host's subtree on an NXDOMAIN) and the apexes.
	names map[string]*entry
	// wild maps the parent of a wildcard host ("example.com." for
	// "*.example.com") to its entry.
	wild  map[string]*entry
	hosts int
	// contested is the hosts claimed by more than one MCI (only the
	// owner's addresses are served for each).
	contested int
	// empty is the hosts with no address at all: every query for them is
	// answered NOERROR with no records.
	empty int
}

// entry is the records of one name; a name with host=false (apex or empty
// non-terminal) exists but has no records.
type entry struct {
	host bool
	// ttl of its records, 0 for the snapshot's.
	ttl uint32
	// groups are the alternative answers of the name, each with the end
	// of its range of the cumulative weights [0, total): a query gets one.
	groups []group
	total  uint64
}

// group is one possible answer: addresses, or one CNAME.
type group struct {
	end   uint64
	v4    []net.IP
	v6    []net.IP
	cname string
}

// pick is the answer for the query numbered n: the groups take turns in
// the shares of their weights, n spread over the range by a mixing hash so
// consecutive queries interleave the groups rather than run in blocks.
func (e *entry) pick(n uint64) *group {
	switch len(e.groups) {
	case 0:
		return nil
	case 1:
		return &e.groups[0]
	}
	r := mix(n) % e.total
	i, _ := slices.BinarySearchFunc(e.groups, r, func(g group, r uint64) int {
		if g.end <= r {
			return -1
		}
		return 1
	})
	return &e.groups[i]
}

// mix is SplitMix64's finalizer: a bijection on uint64 whose outputs of
// consecutive inputs look independent.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Synced says whether the snapshot reflects a synced cache; an unsynced
// snapshot is answered SERVFAIL.
func (s *Snapshot) Synced() bool { return s != nil && s.synced }

// Hosts is the number of hosts (wildcards included) in the snapshot.
func (s *Snapshot) Hosts() int {
	if s == nil {
		return 0
	}
	return s.hosts
}

// fqdn is a canonical host (HostKeys) as the name queries ask for: with
// the root's dot.
func fqdn(host string) string { return host + "." }

// asciiLower lowercases ASCII letters only: names come in presentation
// format, where other bytes are escaped, and must not be rewritten.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// parent is name without its first label, "" for the root.
func parent(name string) string {
	if name == "." || name == "" {
		return ""
	}
	off, end := dns.NextLabel(name, 0)
	if end {
		return "."
	}
	return name[off:]
}

// outermostZoneOf returns the shortest zone containing name (FQDN,
// lowercase), or "".
func outermostZoneOf(zones map[string]struct{}, name string) string {
	if _, ok := zones["."]; ok {
		return "."
	}
	outer := ""
	for off := 0; off < len(name); {
		if _, ok := zones[name[off:]]; ok {
			outer = name[off:]
		}
		var end bool
		if off, end = dns.NextLabel(name, off); end {
			break
		}
	}
	return outer
}

// zoneOf returns the longest zone containing name (FQDN, lowercase), or "".
func zoneOf(zones map[string]struct{}, name string) string {
	off := 0
	for {
		if _, ok := zones[name[off:]]; ok {
			return name[off:]
		}
		var end bool
		off, end = dns.NextLabel(name, off)
		if end || off >= len(name) {
			break
		}
	}
	if _, ok := zones["."]; ok {
		return "."
	}
	return ""
}

// NewSnapshot is the table the server answers from for mcis (the Table
// builds one on every change; a test can compare it with another output).
// zones are apexes as FQDNs (nil: every host is its own apex). It returns
// the hosts it left out.
// Each host gets the answers of its owner only (HostAnswers under rules),
// so no MCI can add its addresses to a host another one claimed first, or
// that its namespace may not claim.
func NewSnapshot(mcis []*networkingv1alpha1.MultiClusterIngress, zones []string, ttl time.Duration, rules DomainRules) (*Snapshot, []IgnoredHost) {
	answers, ignored := HostAnswers(mcis, rules)
	owners := Owners(mcis, rules)
	exact := map[string]*entry{}
	wild := map[string]*entry{}
	// Hosts of one owner share the targets' slice, so they share entries.
	built := map[*Target]*entry{}
	for i := range answers {
		a := &answers[i]
		var e *entry
		if len(a.Targets) > 0 {
			e = built[&a.Targets[0]]
		}
		if e == nil || e.ttl != uint32(a.TTL/time.Second) {
			e = newEntry(a)
			if len(a.Targets) > 0 {
				built[&a.Targets[0]] = e
			}
		}
		h, set := a.Host, exact
		if hostnames.IsWildcard(h) {
			h, set = h[len(hostnames.Wildcard)+1:], wild
		}
		set[fqdn(h)] = e
	}

	s := &Snapshot{synced: true, ttl: uint32(ttl / time.Second), zones: map[string]struct{}{},
		names: map[string]*entry{}, wild: map[string]*entry{}, contested: owners.Contested()}
	if len(zones) > 0 {
		for _, z := range zones {
			s.zones[z] = struct{}{}
		}
	} else {
		for h := range exact {
			s.zones[h] = struct{}{}
		}
		for p := range wild {
			s.zones[p] = struct{}{}
		}
	}
	for z := range s.zones {
		s.names[z] = &entry{}
	}
	// ensure marks name and its ancestors as existing, up to the outermost
	// zone holding name: a host's ancestors exist in every zone above it
	// too (as a delegation's would), so a wildcard there never answers
	// them (RFC 4592). An existing name that is no apex had its ancestors
	// marked when it was.
	ensure := func(name string) {
		top := outermostZoneOf(s.zones, name)
		for n := name; n != "" && len(n) >= len(top); n = parent(n) {
			if _, ok := s.names[n]; ok {
				if _, apex := s.zones[n]; !apex {
					return
				}
				continue
			}
			s.names[n] = &entry{}
		}
	}
	outside := func(h string) {
		ignored = append(ignored, IgnoredHost{strings.TrimSuffix(h, "."), "outside every zone"})
	}
	for h, e := range exact {
		apex := zoneOf(s.zones, h)
		if apex == "" {
			outside(h)
			continue
		}
		ensure(parent(h))
		if h == apex {
			e = withoutCNAMEs(e)
		}
		s.names[h] = e
		s.hosts++
		s.countEmpty(e)
	}
	for p, e := range wild {
		apex := zoneOf(s.zones, p)
		if apex == "" {
			outside("*." + p)
			continue
		}
		ensure(p)
		s.wild[p] = e
		s.hosts++
		s.countEmpty(e)
	}
	s.serial = s.hash()
	return s, ignored
}

// countEmpty counts a served host that has no records.
func (s *Snapshot) countEmpty(e *entry) {
	if len(e.groups) == 0 {
		s.empty++
	}
}

// newEntry turns a host's answer into its groups: one per target when
// weighted; otherwise every IP target in one group (weighing as much as
// its targets together) and one group per hostname target.
func newEntry(a *HostAnswer) *entry {
	e := &entry{host: true, ttl: uint32(a.TTL / time.Second)}
	var groups []group
	var weights []uint64
	shared := -1 // index of the group of every IP target, unweighted
	for _, t := range a.Targets {
		w := uint64(max(t.Weight, 1))
		if t.Hostname != "" {
			groups, weights = append(groups, group{cname: t.Hostname}), append(weights, w)
			continue
		}
		var g group
		for _, ip := range t.IPs {
			if ip.Is4() {
				g.v4 = append(g.v4, net.IP(ip.AsSlice()))
			} else {
				g.v6 = append(g.v6, net.IP(ip.AsSlice()))
			}
		}
		switch {
		case a.Weighted || shared < 0:
			if !a.Weighted {
				shared = len(groups)
			}
			groups, weights = append(groups, g), append(weights, w)
		default:
			groups[shared].v4 = append(groups[shared].v4, g.v4...)
			groups[shared].v6 = append(groups[shared].v6, g.v6...)
			weights[shared] += w
		}
	}
	for i := range groups {
		dedupe(&groups[i])
		e.total += weights[i]
		groups[i].end = e.total
	}
	e.groups = groups
	return e
}

// withoutCNAMEs is e without its CNAME groups: a zone apex has an SOA, so
// it cannot have a CNAME (RFC 1034 3.6.2).
func withoutCNAMEs(e *entry) *entry {
	if !slices.ContainsFunc(e.groups, func(g group) bool { return g.cname != "" }) {
		return e
	}
	out := &entry{host: e.host, ttl: e.ttl}
	var prev uint64
	for _, g := range e.groups {
		w := g.end - prev
		prev = g.end
		if g.cname != "" {
			continue
		}
		out.total += w
		g.end = out.total
		out.groups = append(out.groups, g)
	}
	return out
}

func dedupe(g *group) {
	for _, ips := range []*[]net.IP{&g.v4, &g.v6} {
		slices.SortFunc(*ips, func(a, b net.IP) int { return bytes.Compare(a, b) })
		*ips = slices.CompactFunc(*ips, func(a, b net.IP) bool { return a.Equal(b) })
	}
}

// hash is the SOA serial: a function of the content only, so every hub
// replica serves the same serial for the same MCIs.
func (s *Snapshot) hash() uint32 {
	h := fnv.New32a()
	write := func(prefix string, m map[string]*entry) {
		keys := make([]string, 0, len(m))
		for k, e := range m {
			if e.host {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			e := m[k]
			fmt.Fprintf(h, "%s%s/%d/%d", prefix, k, e.ttl, len(e.groups))
			for _, g := range e.groups {
				fmt.Fprintf(h, "/%d/%s/", g.end, g.cname)
				for _, ip := range g.v4 {
					h.Write(ip)
				}
				h.Write([]byte{0})
				for _, ip := range g.v6 {
					h.Write(ip)
				}
				h.Write([]byte{0})
			}
		}
	}
	write("", s.names)
	write("*.", s.wild)
	return h.Sum32()
}

// Table keeps the current Snapshot of an MCI informer's cache.
type Table struct {
	informer cache.SharedIndexInformer
	lister   networkinglisters.MultiClusterIngressLister
	reg      cache.ResourceEventHandlerRegistration
	zones    []string
	ttl      time.Duration
	rules    DomainRules
	metrics  *Metrics

	snap  atomic.Pointer[Snapshot]
	dirty chan struct{}
	// ignored is the hosts last logged as ignored (rebuild goroutine only),
	// so an unchanged mistake is logged once, not on every rebuild.
	ignored map[IgnoredHost]bool
}

// NewTable registers on the MCI informer; Run keeps the snapshot current.
// zones, ttl and rules are as in Options (zones as FQDNs).
func NewTable(mcis cache.SharedIndexInformer, zones []string, ttl time.Duration, rules DomainRules, m *Metrics) (*Table, error) {
	t := &Table{informer: mcis, lister: networkinglisters.NewMultiClusterIngressLister(mcis.GetIndexer()),
		zones: zones, ttl: ttl, rules: rules, metrics: m, dirty: make(chan struct{}, 1), ignored: map[IgnoredHost]bool{}}
	t.snap.Store(&Snapshot{})
	reg, err := mcis.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { t.markDirty() },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*networkingv1alpha1.MultiClusterIngress)
			n, ok2 := newObj.(*networkingv1alpha1.MultiClusterIngress)
			if ok1 && ok2 && o.ResourceVersion == n.ResourceVersion {
				return // periodic resync: nothing changed
			}
			t.markDirty()
		},
		DeleteFunc: func(any) { t.markDirty() },
	})
	if err != nil {
		return nil, fmt.Errorf("dns traffic manager: watch MultiClusterIngresses: %w", err)
	}
	t.reg = reg
	return t, nil
}

// markDirty asks for a rebuild; bursts of events coalesce into one.
func (t *Table) markDirty() {
	select {
	case t.dirty <- struct{}{}:
	default:
	}
}

// HasSynced is true once a snapshot of the synced cache is being served.
func (t *Table) HasSynced() bool { return t.snap.Load().Synced() }

// Snapshot is the current snapshot (never nil).
func (t *Table) Snapshot() *Snapshot { return t.snap.Load() }

// Run rebuilds the snapshot on every change until ctx is done. The informer
// itself is started by its factory.
func (t *Table) Run(ctx context.Context) {
	log := klog.FromContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), t.reg.HasSynced) {
		return
	}
	t.rebuild(log)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.dirty:
			t.rebuild(log)
		}
	}
}

func (t *Table) rebuild(log logr.Logger) {
	mcis, err := t.lister.List(labels.Everything())
	if err != nil { // the cache lister does not fail; keep serving the old snapshot
		log.Error(err, "Listing MultiClusterIngresses")
		return
	}
	s, ignored := NewSnapshot(mcis, t.zones, t.ttl, t.rules)
	t.snap.Store(s)
	t.metrics.Hosts.Set(float64(s.hosts))
	t.metrics.HostConflicts.Set(float64(s.contested))
	t.metrics.HostsWithoutAddresses.Set(float64(s.empty))
	now := make(map[IgnoredHost]bool, len(ignored))
	for _, ig := range ignored {
		now[ig] = true
		if !t.ignored[ig] {
			log.Info("DNS traffic manager ignores MultiClusterIngress host", "host", ig.Host, "reason", ig.Reason)
		}
	}
	t.ignored = now
}
