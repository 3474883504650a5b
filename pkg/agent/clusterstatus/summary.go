package clusterstatus

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	resourcehelper "k8s.io/component-helpers/resource"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/quantities"
)

// NodeSummary counts nodes and Ready nodes.
func NodeSummary(nodes []*corev1.Node) *clusterv1alpha1.NodeSummary {
	s := &clusterv1alpha1.NodeSummary{TotalNum: int32(len(nodes))}
	for _, n := range nodes {
		if nodeReady(n) {
			s.ReadyNum++
		}
	}
	return s
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ResourceSummary sums the allocatable resources of Ready, schedulable nodes,
// the requests of pods bound to a node (allocated, plus a "pods" count) and
// of pods not yet bound (allocating). Finished pods hold nothing.
//
// What it writes is bounded (quantities), so that the hub's CRD admits the
// status write — a refused one would also lose the Ready condition — and the
// hub can compute with it: a node's value out of range or negative counts
// as none of that resource, a pod with a request out of range (the member's
// kubelet would not admit it, its scheduler cannot place it) holds nothing,
// and a sum above quantities.Max is written as quantities.Max.
func ResourceSummary(nodes []*corev1.Node, pods []*corev1.Pod) *clusterv1alpha1.ResourceSummary {
	s := &clusterv1alpha1.ResourceSummary{
		Allocatable: corev1.ResourceList{},
		Allocated:   corev1.ResourceList{},
		Allocating:  corev1.ResourceList{},
	}
	for _, n := range nodes {
		if !nodeReady(n) || n.Spec.Unschedulable {
			continue
		}
		addBounded(s.Allocatable, n.Status.Allocatable)
	}
	var bound int64
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || !requestsBounded(p) {
			continue
		}
		requests := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		if p.Spec.NodeName != "" {
			addBounded(s.Allocated, requests)
			bound++
		} else {
			addBounded(s.Allocating, requests)
		}
	}
	if bound > 0 {
		s.Allocated[corev1.ResourcePods] = *resource.NewQuantity(bound, resource.DecimalSI)
	}
	for _, l := range []corev1.ResourceList{s.Allocatable, s.Allocated, s.Allocating} {
		for name, q := range l {
			if q.IsZero() {
				delete(l, name)
				continue
			}
			if _, err := quantities.Milli(&q); err != nil {
				l[name] = *resource.NewQuantity(quantities.Max, q.Format)
			}
		}
	}
	if len(s.Allocated) == 0 {
		s.Allocated = nil
	}
	if len(s.Allocating) == 0 {
		s.Allocating = nil
	}
	if len(s.Allocatable) == 0 {
		s.Allocatable = nil
	}
	return s
}

// addBounded adds to sum every value of add that is within range and not
// negative (quantities.NonNegativeMilli). A sum of such values computes no
// large power of ten, whatever it grows to.
func addBounded(sum, add corev1.ResourceList) {
	for name, q := range add {
		if _, err := quantities.NonNegativeMilli(&q); err != nil {
			continue
		}
		cur := sum[name]
		cur.Add(q)
		sum[name] = cur
	}
}

// requestsBounded says whether every request resourcehelper.PodRequests
// reads of p (its containers', init containers', pod-level and overhead)
// is within range and not negative; only then is its arithmetic cheap.
func requestsBounded(p *corev1.Pod) bool {
	lists := []corev1.ResourceList{p.Spec.Overhead}
	if p.Spec.Resources != nil {
		lists = append(lists, p.Spec.Resources.Requests)
	}
	for _, c := range p.Spec.Containers {
		lists = append(lists, c.Resources.Requests)
	}
	for _, c := range p.Spec.InitContainers {
		lists = append(lists, c.Resources.Requests)
	}
	for _, l := range lists {
		if quantities.CheckList(l, "", true) != nil {
			return false
		}
	}
	return true
}

// APIEnablements turns discovery's resource lists into the sorted list the
// scheduler filters on; subresources are left out.
func APIEnablements(lists []*metav1.APIResourceList) []clusterv1alpha1.APIEnablement {
	out := make([]clusterv1alpha1.APIEnablement, 0, len(lists))
	for _, l := range lists {
		if l == nil {
			continue
		}
		e := clusterv1alpha1.APIEnablement{GroupVersion: l.GroupVersion}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			e.Resources = append(e.Resources, clusterv1alpha1.APIResource{Name: r.Name, Kind: r.Kind})
		}
		sort.Slice(e.Resources, func(i, j int) bool { return e.Resources[i].Name < e.Resources[j].Name })
		// The Cluster CRD's bounds: a member serving more is cut, in sort
		// order, rather than having every status write refused.
		if len(e.Resources) > MaxAPIResources {
			e.Resources = e.Resources[:MaxAPIResources]
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GroupVersion < out[j].GroupVersion })
	if len(out) > MaxAPIEnablements {
		out = out[:MaxAPIEnablements]
	}
	return out
}

// The Cluster CRD's bounds on status.apiEnablements (pkg/apis/cluster).
const (
	MaxAPIEnablements = 1024
	MaxAPIResources   = 1024
)

// DiscoverAPIEnablements asks the member for its served resources. A partial
// answer (some aggregated API down) is used for the groups that answered; it
// returns nil, err only when nothing came back.
func DiscoverAPIEnablements(client discovery.DiscoveryInterface) ([]clusterv1alpha1.APIEnablement, error) {
	_, lists, err := client.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, err
	}
	if len(lists) == 0 {
		return nil, err
	}
	return APIEnablements(lists), err
}
