package clusterstatus

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
)

// nodeWith returns a node with the given Ready status ("" for no Ready
// condition) and allocatable resources.
func nodeWith(name string, ready corev1.ConditionStatus, allocatable corev1.ResourceList) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: allocatable}}
	// Another condition first: only the Ready condition counts.
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse})
	if ready != "" {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: ready})
	}
	return n
}

// podWith returns a pod on nodeName ("" for unbound) in phase whose containers
// request the given resources.
func podWith(nodeName string, phase corev1.PodPhase, requests ...corev1.ResourceList) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: nodeName}, Status: corev1.PodStatus{Phase: phase}}
	for _, r := range requests {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Resources: corev1.ResourceRequirements{Requests: r}})
	}
	return p
}

func resList(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// sameResources compares lists by quantity value ("1000m" equals "1").
func sameResources(got, want corev1.ResourceList) bool {
	if len(got) != len(want) || (got == nil) != (want == nil) {
		return false
	}
	for name, q := range want {
		g, ok := got[name]
		if !ok || g.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

func TestNodeSummary(t *testing.T) {
	got := NodeSummary([]*corev1.Node{
		nodeWith("ready", corev1.ConditionTrue, nil),
		nodeWith("not-ready", corev1.ConditionFalse, nil),
		nodeWith("unknown", corev1.ConditionUnknown, nil),
		nodeWith("no-condition", "", nil),
	})
	if got.TotalNum != 4 || got.ReadyNum != 1 {
		t.Fatalf("NodeSummary = %+v, want 4 nodes, 1 ready", got)
	}
	if got := NodeSummary(nil); got.TotalNum != 0 || got.ReadyNum != 0 {
		t.Fatalf("NodeSummary(nil) = %+v", got)
	}
}

func TestResourceSummary(t *testing.T) {
	unschedulable := nodeWith("cordoned", corev1.ConditionTrue, resList("cpu", "100", "memory", "100Gi"))
	unschedulable.Spec.Unschedulable = true
	withInit := podWith("ready", corev1.PodRunning, resList("cpu", "1"))
	// An init container runs alone before the app containers: the pod
	// requests the larger of it and the app containers' sum (3 > 1 CPU).
	withInit.Spec.InitContainers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: resList("cpu", "3")}}}

	cases := []struct {
		name                                      string
		nodes                                     []*corev1.Node
		pods                                      []*corev1.Pod
		wantAllocatable, wantAllocated, wantAlloc corev1.ResourceList
	}{
		{
			name: "nothing: empty lists are nil",
		},
		{
			name: "only Ready schedulable nodes offer resources",
			nodes: []*corev1.Node{
				nodeWith("ready", corev1.ConditionTrue, resList("cpu", "4", "memory", "8Gi", "pods", "110")),
				nodeWith("ready-2", corev1.ConditionTrue, resList("cpu", "2", "memory", "4Gi", "pods", "110")),
				unschedulable,
				nodeWith("not-ready", corev1.ConditionFalse, resList("cpu", "100")),
				nodeWith("no-condition", "", resList("cpu", "100")),
			},
			wantAllocatable: resList("cpu", "6", "memory", "12Gi", "pods", "220"),
		},
		{
			name: "zero quantities are left out",
			nodes: []*corev1.Node{
				nodeWith("ready", corev1.ConditionTrue, resList("cpu", "4", "nvidia.com/gpu", "0")),
			},
			wantAllocatable: resList("cpu", "4"),
		},
		{
			name: "bound pods are allocated, unbound allocating, finished ones hold nothing",
			pods: []*corev1.Pod{
				podWith("ready", corev1.PodRunning, resList("cpu", "500m", "memory", "1Gi"), resList("cpu", "250m")),
				podWith("ready", corev1.PodPending, resList("memory", "1Gi")), // bound, not started yet
				podWith("", corev1.PodPending, resList("cpu", "2")),
				podWith("", corev1.PodPending, resList("cpu", "1", "memory", "512Mi")),
				podWith("ready", corev1.PodSucceeded, resList("cpu", "100")),
				podWith("ready", corev1.PodFailed, resList("cpu", "100")),
				podWith("", corev1.PodFailed, resList("cpu", "100")),
			},
			wantAllocated: resList("cpu", "750m", "memory", "2Gi", "pods", "2"),
			wantAlloc:     resList("cpu", "3", "memory", "512Mi"),
		},
		{
			name:          "a bound pod without requests still counts as a pod",
			pods:          []*corev1.Pod{podWith("ready", corev1.PodRunning)},
			wantAllocated: resList("pods", "1"),
		},
		{
			name:          "init containers: the max rule",
			pods:          []*corev1.Pod{withInit},
			wantAllocated: resList("cpu", "3", "pods", "1"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ResourceSummary(tc.nodes, tc.pods)
			if !sameResources(got.Allocatable, tc.wantAllocatable) {
				t.Errorf("allocatable = %v, want %v", got.Allocatable, tc.wantAllocatable)
			}
			if !sameResources(got.Allocated, tc.wantAllocated) {
				t.Errorf("allocated = %v, want %v", got.Allocated, tc.wantAllocated)
			}
			if !sameResources(got.Allocating, tc.wantAlloc) {
				t.Errorf("allocating = %v, want %v", got.Allocating, tc.wantAlloc)
			}
		})
	}
}

func TestAPIEnablements(t *testing.T) {
	got := APIEnablements([]*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", Kind: "Pod"}, {Name: "pods/log", Kind: "Pod"}, {Name: "configmaps", Kind: "ConfigMap"},
		}},
		nil, // discovery leaves nil entries for groups that failed
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Kind: "Deployment"}, {Name: "deployments/scale", Kind: "Scale"}, {Name: "daemonsets", Kind: "DaemonSet"},
		}},
		{GroupVersion: "batch/v1"},
	})
	want := []clusterv1alpha1.APIEnablement{
		{GroupVersion: "apps/v1", Resources: []clusterv1alpha1.APIResource{{Name: "daemonsets", Kind: "DaemonSet"}, {Name: "deployments", Kind: "Deployment"}}},
		{GroupVersion: "batch/v1"},
		{GroupVersion: "v1", Resources: []clusterv1alpha1.APIResource{{Name: "configmaps", Kind: "ConfigMap"}, {Name: "pods", Kind: "Pod"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("APIEnablements =\n%+v\nwant\n%+v", got, want)
	}
}

// TestAPIEnablementsKeepToTheCRDBounds: a member serving more group
// versions or resources than the Cluster CRD stores is cut, first by sort
// order, so the agent's status writes are never all refused.
func TestAPIEnablementsKeepToTheCRDBounds(t *testing.T) {
	var lists []*metav1.APIResourceList
	for i := range MaxAPIEnablements + 10 {
		l := &metav1.APIResourceList{GroupVersion: fmt.Sprintf("g%05d.example.com/v1", i)}
		n := 1
		if i == 0 {
			n = MaxAPIResources + 5
		}
		for j := range n {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: fmt.Sprintf("r%05d", j), Kind: "K"})
		}
		lists = append(lists, l)
	}
	got := APIEnablements(lists)
	if len(got) != MaxAPIEnablements {
		t.Fatalf("%d group versions, want %d", len(got), MaxAPIEnablements)
	}
	if got[0].GroupVersion != "g00000.example.com/v1" || got[len(got)-1].GroupVersion != fmt.Sprintf("g%05d.example.com/v1", MaxAPIEnablements-1) {
		t.Errorf("not the first group versions in order: %s … %s", got[0].GroupVersion, got[len(got)-1].GroupVersion)
	}
	if len(got[0].Resources) != MaxAPIResources || got[0].Resources[0].Name != "r00000" {
		t.Errorf("%d resources (first %s), want the first %d", len(got[0].Resources), got[0].Resources[0].Name, MaxAPIResources)
	}
}
