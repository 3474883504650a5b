package dnstraffic

import (
	"slices"
	"testing"

	"k8s.io/client-go/tools/cache"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
)

// TestClaimantsAndSharingHostsSeeSubtrees: what Owners needs under
// DomainRules.Subtrees reaches the controllers: Claimants of a name
// beneath an exact host include that host's claimants, and a change of the
// exact host re-evaluates the claimants beneath it (SharingHosts), not
// those of unrelated or wildcard-only names.
func TestClaimantsAndSharingHostsSeeSubtrees(t *testing.T) {
	web := claim{"team-a/web", 1, []string{"web.example.com"}, ""}.mci()
	x := claim{"team-x/x", 2, []string{"x.web.example.com"}, ""}.mci()
	deep := claim{"team-y/deep", 3, []string{"*.a.x.web.example.com"}, ""}.mci()
	other := claim{"team-z/other", 4, []string{"other.example.com"}, ""}.mci()
	byHost := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{HostIndex: HostIndexFunc, HostAboveIndex: HostAboveIndexFunc})
	for _, m := range []*networkingv1alpha1.MultiClusterIngress{web, x, deep, other} {
		if err := byHost.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	refs := func(objs []*networkingv1alpha1.MultiClusterIngress) []string {
		var out []string
		for _, o := range objs {
			out = append(out, RefOf(o).String())
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	got, err := Claimants(byHost, deep)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"team-a/web", "team-x/x", "team-y/deep"}; !slices.Equal(refs(got), want) {
		t.Errorf("Claimants(deep) = %v, want %v", refs(got), want)
	}
	var sharing []*networkingv1alpha1.MultiClusterIngress
	for _, o := range SharingHosts(byHost, cache.DeletedFinalStateUnknown{Key: "team-a/web", Obj: web}) {
		sharing = append(sharing, o.(*networkingv1alpha1.MultiClusterIngress))
	}
	if want := []string{"team-a/web", "team-x/x", "team-y/deep"}; !slices.Equal(refs(sharing), want) {
		t.Errorf("SharingHosts(web) = %v, want %v", refs(sharing), want)
	}
	// The decision from Claimants is the decision from all.
	all := Owners([]*networkingv1alpha1.MultiClusterIngress{web, x, deep, other}, DomainRules{Subtrees: true})
	from := Owners(got, DomainRules{Subtrees: true})
	if !slices.Equal(all.Conflicts(RefOf(deep)), from.Conflicts(RefOf(deep))) || len(all.Conflicts(RefOf(deep))) != 1 {
		t.Errorf("deep's conflicts: from its claimants %v, from all %v (want one, owned by team-a/web)", from.Conflicts(RefOf(deep)), all.Conflicts(RefOf(deep)))
	}
}
