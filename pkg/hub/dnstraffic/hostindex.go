package dnstraffic

import (
	"slices"

	"k8s.io/client-go/tools/cache"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
)

// HostIndex indexes MultiClusterIngresses by host (HostKeys), so who owns
// a host is decided from the ingresses that share it, and a change
// re-evaluates exactly those. The ingress controller and the DNSEndpoint
// publisher share the informer and this one index.
const HostIndex = "flotilla.io/multicluster-ingress-host"

// HostIndexFunc is HostIndex's index function.
func HostIndexFunc(obj any) ([]string, error) {
	mci, ok := obj.(*networkingv1alpha1.MultiClusterIngress)
	if !ok {
		return nil, nil
	}
	keys, _ := HostKeys(&mci.Spec.IngressSpec)
	return keys, nil
}

// AddHostIndex adds HostIndex to a MultiClusterIngress informer, unless
// another controller sharing the informer already has.
func AddHostIndex(informer cache.SharedIndexInformer) error {
	if _, ok := informer.GetIndexer().GetIndexers()[HostIndex]; ok {
		return nil
	}
	return informer.AddIndexers(cache.Indexers{HostIndex: HostIndexFunc})
}

// HostsChanged says whether an update changed the hosts an ingress claims.
func HostsChanged(oldObj, newObj any) bool {
	oldKeys, _ := HostIndexFunc(oldObj)
	newKeys, _ := HostIndexFunc(newObj)
	return !slices.Equal(oldKeys, newKeys)
}

// SharingHosts are the ingresses in byHost (indexed by HostIndex) that
// claim a host of obj, obj itself included if indexed; obj may be a
// deletion tombstone.
func SharingHosts(byHost cache.Indexer, obj any) []any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	keys, _ := HostIndexFunc(obj)
	var out []any
	for _, k := range keys {
		claimants, _ := byHost.ByIndex(HostIndex, k)
		out = append(out, claimants...)
	}
	return out
}

// Claimants are the ingresses sharing a host with mci, mci first and each
// once: all that ownership of its hosts depends on (Owners).
func Claimants(byHost cache.Indexer, mci *networkingv1alpha1.MultiClusterIngress) ([]*networkingv1alpha1.MultiClusterIngress, error) {
	keys, _ := HostKeys(&mci.Spec.IngressSpec)
	seen := map[IngressRef]bool{RefOf(mci): true}
	out := []*networkingv1alpha1.MultiClusterIngress{mci}
	for _, k := range keys {
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
