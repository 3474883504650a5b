package framework

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

func TestRolledOutStatus(t *testing.T) {
	deployment := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"app"},"spec":{"replicas":4}}`
	configMap := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","namespace":"other"}}`
	work := func(generation int64, applied *int64, manifests ...string) *workv1alpha1.Work {
		w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "flotilla-es-c1", Generation: generation,
			Annotations: map[string]string{workobjects.AnnotationBindingNamespace: "apps"}}}
		for _, m := range manifests {
			w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(m)}})
		}
		if applied != nil {
			w.Status.Conditions = []metav1.Condition{{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
				Reason: "AppliedSuccessful", ObservedGeneration: *applied}}
		}
		return w
	}
	gen := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name      string
		work      *workv1alpha1.Work
		wantWrite bool
		// wantStatus: each manifest's reflected status, "" for none.
		wantStatus []string
	}{
		{name: "new Work: fully rolled out Deployment", work: work(1, nil, deployment), wantWrite: true,
			wantStatus: []string{`{"availableReplicas":4,"generation":1,"observedGeneration":1,"readyReplicas":4,"replicas":4,"updatedReplicas":4}`}},
		{name: "current generation already reported: no write", work: work(2, gen(2), deployment)},
		{name: "new generation: reported again", work: work(3, gen(2), deployment), wantWrite: true,
			wantStatus: []string{`{"availableReplicas":4,"generation":1,"observedGeneration":1,"readyReplicas":4,"replicas":4,"updatedReplicas":4}`}},
		{name: "no replicas: no status, still healthy", work: work(1, nil, deployment, configMap), wantWrite: true,
			wantStatus: []string{`{"availableReplicas":4,"generation":1,"observedGeneration":1,"readyReplicas":4,"replicas":4,"updatedReplicas":4}`, ""}},
		{name: "nothing to apply: no write", work: work(1, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, write := RolledOutStatus(tc.work, metav1.Now())
			if write != tc.wantWrite {
				t.Fatalf("write = %v, want %v", write, tc.wantWrite)
			}
			if !write {
				return
			}
			for _, typ := range []string{workv1alpha1.WorkConditionApplied, workv1alpha1.WorkConditionAvailable} {
				c := meta.FindStatusCondition(status.Conditions, typ)
				if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != tc.work.Generation {
					t.Errorf("%s = %+v, want True for generation %d", typ, c, tc.work.Generation)
				}
			}
			if len(status.ManifestStatuses) != len(tc.wantStatus) {
				t.Fatalf("%d manifest statuses, want %d", len(status.ManifestStatuses), len(tc.wantStatus))
			}
			for i, ms := range status.ManifestStatuses {
				if ms.Health != workv1alpha1.ResourceHealthy || ms.Identifier.Ordinal != int32(i) {
					t.Errorf("manifest %d: health %s ordinal %d", i, ms.Health, ms.Identifier.Ordinal)
				}
				var got string
				if ms.Status != nil {
					var v any
					_ = json.Unmarshal(ms.Status.Raw, &v)
					b, _ := json.Marshal(v)
					got = string(b)
				}
				if got != tc.wantStatus[i] {
					t.Errorf("manifest %d status = %s, want %s", i, got, tc.wantStatus[i])
				}
			}
			if ns := status.ManifestStatuses[0].Identifier.Namespace; ns != "apps" {
				t.Errorf("namespace = %q, want the binding's (apps)", ns)
			}
			if tc.work.Status.ManifestStatuses != nil {
				t.Error("the Work in the cache was changed")
			}
		})
	}
}
