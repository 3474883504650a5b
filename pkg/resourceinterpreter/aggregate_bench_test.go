package resourceinterpreter

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-io/flotilla/manifests/interpreters"
)

// shippedInterpreter is an Interpreter with the customizations of
// manifests/interpreters.
func shippedInterpreter(tb testing.TB) *Interpreter {
	tb.Helper()
	rics, err := interpreters.Load()
	if err != nil {
		tb.Fatal(err)
	}
	i := New()
	for _, ric := range rics {
		i.Set(ric)
		gv, _ := schema.ParseGroupVersion(ric.Spec.Target.APIVersion)
		if i.Rules(gv.WithKind(ric.Spec.Target.Kind)) == nil {
			tb.Fatalf("%s does not compile", ric.Name)
		}
	}
	return i
}

var shippedRolloutGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout"}

// rolloutStatuses is n clusters' reported Rollout statuses.
func rolloutStatuses(n int) []ClusterStatus {
	out := make([]ClusterStatus, n)
	for k := range out {
		out[k] = ClusterStatus{ClusterName: fmt.Sprintf("member%d", k), Status: &runtime.RawExtension{Raw: []byte(
			`{"phase":"Healthy","replicas":3,"updatedReplicas":3,"readyReplicas":3,"availableReplicas":3,"observedGeneration":"2","generation":2}`)}}
	}
	return out
}

// deploymentStatuses is n clusters' reported Deployment statuses.
func deploymentStatuses(n int) []ClusterStatus {
	out := make([]ClusterStatus, n)
	for k := range out {
		out[k] = ClusterStatus{ClusterName: fmt.Sprintf("member%d", k), Status: &runtime.RawExtension{Raw: []byte(
			`{"replicas":3,"updatedReplicas":3,"readyReplicas":3,"availableReplicas":3,"observedGeneration":2,"generation":2}`)}}
	}
	return out
}

// BenchmarkAggregateStatus is the detector's aggregation of a template's
// workloadStatus: the shipped Rollout rule and the built-in Deployment
// aggregation, over 3 and 1,000 clusters.
func BenchmarkAggregateStatus(b *testing.B) {
	i := shippedInterpreter(b)
	deployment := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	for _, n := range []int{3, 1000} {
		for _, tc := range []struct {
			name     string
			gvk      schema.GroupVersionKind
			statuses []ClusterStatus
		}{{"Rollout", shippedRolloutGVK, rolloutStatuses(n)}, {"Deployment", deployment, deploymentStatuses(n)}} {
			b.Run(fmt.Sprintf("%s/%d", tc.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if agg := i.AggregateStatus(tc.gvk, tc.statuses); agg.Status == nil || len(agg.LeftOut) > 0 || agg.Failed != "" {
						b.Fatalf("%+v", agg)
					}
				}
			})
		}
	}
}
