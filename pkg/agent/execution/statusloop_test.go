package execution

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
)

// statusLoopWorks is the fleet size the issue sets: 5,000 Works reported
// in at most 60 s.
const statusLoopWorks = 5000

// rolloutCustomization is a realistic customization: health from the
// generation, phase and replicas, and a reflected status.
func rolloutCustomization() *configv1alpha1.ResourceInterpreterCustomization {
	return &configv1alpha1.ResourceInterpreterCustomization{
		ObjectMeta: metav1.ObjectMeta{Name: "rollouts"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target: configv1alpha1.CustomizationTarget{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout"},
			Customizations: configv1alpha1.CustomizationRules{
				HealthInterpretation: &configv1alpha1.HealthInterpretation{Expression: `
					object.metadata.generation == int(object.?status.?observedGeneration.orValue("0")) &&
					object.?status.?phase.orValue("") == "Healthy" &&
					object.?status.?availableReplicas.orValue(0) == object.spec.?replicas.orValue(1) &&
					!object.?status.?conditions.orValue([]).exists(c, c.type == "Progressing" && c.reason == "ProgressDeadlineExceeded")`},
				StatusReflection: &configv1alpha1.StatusReflection{Expression: `{"phase": object.?status.?phase.orValue(""),
					"availableReplicas": object.?status.?availableReplicas.orValue(0), "observedGeneration": object.?status.?observedGeneration.orValue("")}`},
				Retention: &configv1alpha1.LocalValueRetention{FieldPaths: []string{"/spec/replicas"}},
			}}}
}

func liveRollouts(t testing.TB, n int) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, n)
	for i := range out {
		var m map[string]any
		if err := utiljson.Unmarshal([]byte(fmt.Sprintf(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout",
		  "metadata":{"name":"web-%d","namespace":"app","generation":3,"labels":{"app":"web"}},
		  "spec":{"replicas":4,"strategy":{"canary":{"steps":[{"setWeight":20},{"pause":{}}]}},
		    "template":{"spec":{"containers":[{"name":"c","image":"nginx:1.27","resources":{"requests":{"cpu":"100m"}}}]}}},
		  "status":{"observedGeneration":"3","phase":"Healthy","availableReplicas":4,"readyReplicas":4,"replicas":4,
		    "conditions":[{"type":"Available","status":"True"},{"type":"Progressing","status":"True","reason":"NewReplicaSetAvailable"},
		      {"type":"Healthy","status":"True"}]}}`, i)), &m); err != nil {
			t.Fatal(err)
		}
		out[i] = &unstructured.Unstructured{Object: m}
	}
	return out
}

// reportOne is the CPU the agent spends on one Work of one customized
// manifest per status report (writeStatus without the API write): health
// and reflected status through the Interpreter, the retention on the
// apply path, and the change check against the last report.
func reportOne(interp *resourceinterpreter.Interpreter, live *unstructured.Unstructured, desired *unstructured.Unstructured,
	last *workv1alpha1.WorkStatus) bool {
	interp.RetainFields(desired, live)
	ms := workv1alpha1.ManifestStatus{Identifier: workv1alpha1.ResourceIdentifier{Kind: live.GetKind(), Name: live.GetName()}}
	ms.Status = interp.ReflectStatus(live)
	ms.Health = interp.Health(live)
	status := workv1alpha1.WorkStatus{ManifestStatuses: []workv1alpha1.ManifestStatus{ms}}
	return equality.Semantic.DeepEqual(status, *last)
}

// BenchmarkStatusLoop5000Works: one op is a full report of 5,000 Works,
// each with one customized manifest. The goal is ≤ 60 s; the CEL
// and reporting CPU is a few hundred milliseconds (the API writes, one per
// changed Work, are what the agent's rate limits pace).
func BenchmarkStatusLoop5000Works(b *testing.B) {
	interp := resourceinterpreter.New()
	interp.Set(rolloutCustomization())
	live := liveRollouts(b, statusLoopWorks)
	desired := make([]*unstructured.Unstructured, len(live))
	for i := range live {
		desired[i] = live[i].DeepCopy()
	}
	last := &workv1alpha1.WorkStatus{}
	b.ResetTimer()
	for b.Loop() {
		for i := range live {
			reportOne(interp, live[i], desired[i], last)
		}
	}
}

// TestStatusLoop5000WorksWithinBudget fails if the per-report CPU for
// 5,000 customized Works is anywhere near the 60 s goal (it allows 10 s,
// so a loaded CI machine passes; the benchmark gives the real figure).
func TestStatusLoop5000WorksWithinBudget(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("short")
	}
	interp := resourceinterpreter.New()
	interp.Set(rolloutCustomization())
	if interp.Rules(live1GVK) == nil {
		t.Fatal("customization did not compile")
	}
	live := liveRollouts(t, statusLoopWorks)
	last := &workv1alpha1.WorkStatus{}
	start := time.Now()
	for i := range live {
		reportOne(interp, live[i], live[i].DeepCopy(), last)
		if h := interp.Health(live[i]); h != workv1alpha1.ResourceHealthy {
			t.Fatalf("health %s", h)
		}
	}
	elapsed := time.Since(start)
	t.Logf("5,000 customized Works: %s of interpretation per report", elapsed)
	if elapsed > 10*time.Second {
		t.Fatalf("5,000 Works took %s", elapsed)
	}
}

var live1GVK = (&unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout"}}).GroupVersionKind()
