package dnstraffic

import (
	"slices"
	"strings"

	"k8s.io/client-go/tools/cache"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
)

// HostIndex indexes MultiClusterIngresses by host (HostKeys), so who owns
// a host is decided from the ingresses that share it, and a change
// re-evaluates exactly those. The ingress controller and the DNSEndpoint
// publisher share the informer and this one index.
const HostIndex = "flotilla.io/multicluster-ingress-host"

// HostAboveIndex indexes MultiClusterIngresses by every name strictly
// above a host they claim ("example.com" for "a.web.example.com"), so a
// change of an exact host re-evaluates the claimants beneath it, whose
// ownership it decides under DomainRules.Subtrees.
const HostAboveIndex = "flotilla.io/multicluster-ingress-host-above"

// HostIndexFunc is HostIndex's index function.
func HostIndexFunc(obj any) ([]string, error) {
	mci, ok := obj.(*networkingv1alpha1.MultiClusterIngress)
	if !ok {
		return nil, nil
	}
	keys, _ := HostKeys(&mci.Spec.IngressSpec)
	return keys, nil
}

// HostAboveIndexFunc is HostAboveIndex's index function.
func HostAboveIndexFunc(obj any) ([]string, error) {
	keys, _ := HostIndexFunc(obj)
	var out []string
	for _, k := range keys {
		out = append(out, above(k)...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// above are the names strictly above key, nearest first.
func above(key string) []string {
	var out []string
	for {
		_, rest, ok := strings.Cut(key, ".")
		if !ok {
			return out
		}
		out = append(out, rest)
		key = rest
	}
}

// AddHostIndex adds HostIndex and HostAboveIndex to a MultiClusterIngress
// informer, unless another controller sharing the informer already has.
func AddHostIndex(informer cache.SharedIndexInformer) error {
	if _, ok := informer.GetIndexer().GetIndexers()[HostIndex]; ok {
		return nil
	}
	return informer.AddIndexers(cache.Indexers{HostIndex: HostIndexFunc, HostAboveIndex: HostAboveIndexFunc})
}

// HostsChanged says whether an update changed the hosts an ingress claims.
func HostsChanged(oldObj, newObj any) bool {
	oldKeys, _ := HostIndexFunc(oldObj)
	newKeys, _ := HostIndexFunc(newObj)
	return !slices.Equal(oldKeys, newKeys)
}

// SharingHosts are the ingresses in byHost (indexed by HostIndex and
// HostAboveIndex) whose ownership obj can change: those that claim a host
// of obj or a name beneath one (DomainRules.Subtrees), obj itself included
// if indexed; obj may be a deletion tombstone.
func SharingHosts(byHost cache.Indexer, obj any) []any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	keys, _ := HostIndexFunc(obj)
	var out []any
	for _, k := range keys {
		claimants, _ := byHost.ByIndex(HostIndex, k)
		out = append(out, claimants...)
		beneath, _ := byHost.ByIndex(HostAboveIndex, k)
		out = append(out, beneath...)
	}
	return out
}

// Claimants are the ingresses claiming a host of mci or a name above one,
// mci first and each once: all that ownership of its hosts depends on
// (Owners, with or without DomainRules.Subtrees).
func Claimants(byHost cache.Indexer, mci *networkingv1alpha1.MultiClusterIngress) ([]*networkingv1alpha1.MultiClusterIngress, error) {
	keys, _ := HostKeys(&mci.Spec.IngressSpec)
	names := slices.Clone(keys)
	for _, k := range keys {
		names = append(names, above(k)...)
	}
	slices.Sort(names)
	seen := map[IngressRef]bool{RefOf(mci): true}
	out := []*networkingv1alpha1.MultiClusterIngress{mci}
	for _, k := range slices.Compact(names) {
		objs, err := byHost.ByIndex(HostIndex, k)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			other, ok := o.(*networkingv1alpha1.MultiClusterIngress)
			if !ok || seen[RefOf(other)] {
				continue
			}
			seen[RefOf(other)] = true
			out = append(out, other)
		}
	}
	return out, nil
}
