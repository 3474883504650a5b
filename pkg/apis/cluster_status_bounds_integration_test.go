package apis_test

import (
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// TestClusterStatusIsBoundedAtAdmission: what a member agent writes into its
// Cluster's status is bounded by the CRD before the hub's informers decode
// it: a lying agent cannot store unbounded lists or strings there.
func TestClusterStatusIsBoundedAtAdmission(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	cs, err := versioned.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	clusters := cs.ClusterV1alpha1().Clusters()
	if _, err := clusters.Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "liar"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	conditions := func(n, message int) []metav1.Condition {
		var out []metav1.Condition
		for i := range n {
			out = append(out, metav1.Condition{Type: fmt.Sprintf("C%d", i), Status: metav1.ConditionTrue, Reason: "R",
				Message: strings.Repeat("é", message), LastTransitionTime: now})
		}
		return out
	}
	enablements := func(groups, resources int) []clusterv1alpha1.APIEnablement {
		out := make([]clusterv1alpha1.APIEnablement, groups)
		for i := range out {
			out[i].GroupVersion = fmt.Sprintf("g%d.example.com/v1", i)
			for j := range resources {
				out[i].Resources = append(out[i].Resources, clusterv1alpha1.APIResource{Name: fmt.Sprintf("r%d", j), Kind: fmt.Sprintf("R%d", j)})
			}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		status clusterv1alpha1.ClusterStatus
		refuse string // "" = accepted
	}{
		{"at the bounds", clusterv1alpha1.ClusterStatus{KubernetesVersion: strings.Repeat("v", 128),
			Conditions: conditions(16, 4096), APIEnablements: enablements(2, 1024),
			NodeSummary: &clusterv1alpha1.NodeSummary{TotalNum: 3, ReadyNum: 3}}, ""},
		{"1024 group versions", clusterv1alpha1.ClusterStatus{APIEnablements: enablements(1024, 1)}, ""},
		{"a long version", clusterv1alpha1.ClusterStatus{KubernetesVersion: strings.Repeat("v", 129)}, "kubernetesVersion"},
		{"17 conditions", clusterv1alpha1.ClusterStatus{Conditions: conditions(17, 1)}, "conditions"},
		{"a long condition message", clusterv1alpha1.ClusterStatus{Conditions: conditions(1, 4097)}, "4096 characters"},
		{"1025 group versions", clusterv1alpha1.ClusterStatus{APIEnablements: enablements(1025, 0)}, "apiEnablements"},
		{"1025 resources", clusterv1alpha1.ClusterStatus{APIEnablements: enablements(1, 1025)}, "resources"},
		{"negative nodes", clusterv1alpha1.ClusterStatus{NodeSummary: &clusterv1alpha1.NodeSummary{TotalNum: -1}}, "totalNum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := clusters.Get(ctx, "liar", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c.Status = tc.status
			_, err = clusters.UpdateStatus(ctx, c, metav1.UpdateOptions{})
			switch {
			case tc.refuse == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refuse != "" && !apierrors.IsInvalid(err):
				t.Fatalf("want Invalid mentioning %q, got %v", tc.refuse, err)
			case tc.refuse != "" && !strings.Contains(err.Error(), tc.refuse):
				t.Fatalf("error does not mention %q: %v", tc.refuse, err)
			}
		})
	}
}

// TestPolicyListsAreBoundedAtAdmission: the lists a tenant's
// PropagationPolicy gives the scheduler to scan for every cluster and every
// schedule are bounded by the CRD.
func TestPolicyListsAreBoundedAtAdmission(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	cs, err := versioned.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("member%d", i)
		}
		return out
	}
	labels := func(n int) map[string]string {
		out := map[string]string{}
		for i := range n {
			out[fmt.Sprintf("k%d", i)] = "v"
		}
		return out
	}
	for i, tc := range []struct {
		name     string
		affinity policyv1alpha1.ClusterAffinity
		refuse   string
	}{
		{"at the bounds", policyv1alpha1.ClusterAffinity{ClusterNames: names(1024), ExcludeClusters: names(1024),
			LabelSelector: &metav1.LabelSelector{MatchLabels: labels(64)},
			FieldSelector: &policyv1alpha1.FieldSelector{MatchExpressions: []policyv1alpha1.FieldSelectorRequirement{{Key: "region", Operator: "In", Values: names(256)}}}}, ""},
		{"1025 clusterNames", policyv1alpha1.ClusterAffinity{ClusterNames: names(1025)}, "clusterNames"},
		{"1025 excluded", policyv1alpha1.ClusterAffinity{ExcludeClusters: names(1025)}, "exclude"},
		{"a long cluster name", policyv1alpha1.ClusterAffinity{ClusterNames: []string{strings.Repeat("a", 254)}}, "clusterNames"},
		{"65 matchLabels", policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: labels(65)}}, "64 matchLabels"},
		{"257 field values", policyv1alpha1.ClusterAffinity{FieldSelector: &policyv1alpha1.FieldSelector{MatchExpressions: []policyv1alpha1.FieldSelectorRequirement{{Key: "region", Operator: "In", Values: names(257)}}}}, "values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pp := &policyv1alpha1.PropagationPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pp-%d", i), Namespace: "default"},
				Spec: policyv1alpha1.PropagationSpec{
					ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}},
					Placement:         policyv1alpha1.Placement{ClusterAffinity: &tc.affinity},
				},
			}
			_, err := cs.PolicyV1alpha1().PropagationPolicies("default").Create(ctx, pp, metav1.CreateOptions{})
			switch {
			case tc.refuse == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refuse != "" && !apierrors.IsInvalid(err):
				t.Fatalf("want Invalid mentioning %q, got %v", tc.refuse, err)
			case tc.refuse != "" && !strings.Contains(err.Error(), tc.refuse):
				t.Fatalf("error does not mention %q: %v", tc.refuse, err)
			}
		})
	}
}
