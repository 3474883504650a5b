package detector

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	bindingctl "github.com/flotilla-io/flotilla/pkg/hub/binding"
)

func TestInFlight(t *testing.T) {
	const gen = 3
	cond := func(typ string, status metav1.ConditionStatus, reason string, observed int64) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, ObservedGeneration: observed}
	}
	scheduled := cond(workv1alpha1.BindingConditionScheduled, metav1.ConditionTrue, "Scheduled", gen)
	notApplied := cond(workv1alpha1.BindingConditionFullyApplied, metav1.ConditionFalse, "NotFullyApplied", gen)
	applied := workv1alpha1.AggregatedStatusItem{ClusterName: "a", Applied: true, ObservedGeneration: gen, Health: workv1alpha1.ResourceHealthy}
	binding := func(conds []metav1.Condition, items ...workv1alpha1.AggregatedStatusItem) *workv1alpha1.ResourceBinding {
		return &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Status: workv1alpha1.ResourceBindingStatus{Conditions: conds, AggregatedStatus: items}}
	}
	deleting := binding(nil)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	for _, c := range []struct {
		name    string
		binding *workv1alpha1.ResourceBinding
		want    bool
	}{
		{"no binding (no policy, refused, conflict)", nil, false},
		{"binding being deleted", deleting, false},
		{"just created: the scheduler has not answered", binding(nil), true},
		{"unschedulable is an answer", binding([]metav1.Condition{cond(workv1alpha1.BindingConditionScheduled, metav1.ConditionFalse, "NoClusterFit", gen)}), false},
		{"scheduled, binding controller not there yet", binding([]metav1.Condition{scheduled}), true},
		{"scheduled, binding controller summed an older generation",
			binding([]metav1.Condition{scheduled, cond(workv1alpha1.BindingConditionFullyApplied, metav1.ConditionTrue, "FullyApplied", gen-1)}, applied), true},
		{"fully applied", binding([]metav1.Condition{scheduled, cond(workv1alpha1.BindingConditionFullyApplied, metav1.ConditionTrue, "FullyApplied", gen)}, applied), false},
		{"Works not made yet", binding([]metav1.Condition{scheduled, notApplied},
			workv1alpha1.AggregatedStatusItem{ClusterName: "a", AppliedMessage: bindingctl.MessageWorkNotCreated},
			workv1alpha1.AggregatedStatusItem{ClusterName: "b", AppliedMessage: bindingctl.MessageWorkNotCreated}), true},
		{"one agent reported, the other not yet", binding([]metav1.Condition{scheduled, notApplied}, applied,
			workv1alpha1.AggregatedStatusItem{ClusterName: "b", AppliedMessage: bindingctl.MessageWaitingForAgent}), true},
		{"an agent applied an older Work", binding([]metav1.Condition{scheduled, notApplied}, applied,
			workv1alpha1.AggregatedStatusItem{ClusterName: "b", Applied: true, ObservedGeneration: gen - 1}), true},
		{"an agent failed to apply: shown at once", binding([]metav1.Condition{scheduled, notApplied},
			workv1alpha1.AggregatedStatusItem{ClusterName: "a", AppliedMessage: bindingctl.MessageWaitingForAgent},
			workv1alpha1.AggregatedStatusItem{ClusterName: "b", AppliedMessage: "admission webhook denied the request"}), false},
		{"an override failed: shown at once", binding([]metav1.Condition{scheduled,
			cond(workv1alpha1.BindingConditionFullyApplied, metav1.ConditionFalse, "OverrideChangedIdentity", gen)},
			workv1alpha1.AggregatedStatusItem{ClusterName: "a", AppliedMessage: bindingctl.MessageWaitingForAgent}), false},
		{"no cluster scheduled", binding([]metav1.Condition{scheduled,
			cond(workv1alpha1.BindingConditionFullyApplied, metav1.ConditionFalse, "NoClusterScheduled", gen)}), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := inFlight(c.binding); got != c.want {
				t.Errorf("inFlight = %v, want %v", got, c.want)
			}
		})
	}
}

func TestHolds(t *testing.T) {
	var h holds
	t0 := time.Unix(1000, 0)
	const d = 10 * time.Second
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, step := range []struct {
		what string
		key  string
		now  time.Time
		want time.Duration
	}{
		{"the first in-flight status starts the hold", "a", at(0), d},
		{"a change 4s in does not restart it", "a", at(4), 6 * time.Second},
		{"another template has its own hold", "b", at(4), d},
		{"after the hold the status is due", "a", at(11), 0},
	} {
		if got := h.wait(step.key, step.now, d, false); got != step.want {
			t.Fatalf("%s: wait = %v, want %v", step.what, got, step.want)
		}
	}
	// Written while still in flight: the next in-flight status of the
	// burst waits twice as long, and so on up to the cap.
	h.written("a", at(11), d)
	if got := h.wait("a", at(12), d, false); got != 19*time.Second {
		t.Fatalf("after one in-flight write: wait = %v, want the rest of a 20s hold (19s)", got)
	}
	now := at(31)
	for range 10 {
		h.written("a", now, d)
		now = now.Add(time.Hour)
	}
	h.written("a", now, d)
	if got := h.wait("a", now, d, false); got != maxStatusHoldFactor*d {
		t.Fatalf("after many in-flight writes: wait = %v, want the cap %v", got, maxStatusHoldFactor*d)
	}
	// Settled: the next burst starts over.
	h.release("a")
	if got := h.wait("a", now, d, false); got != d {
		t.Fatalf("after release: wait = %v, want a new hold %v", got, d)
	}
	// A hold begun in the hub's stages (8 holds) ends one hold after its
	// start once the binding waits for its agents.
	h.release("a")
	if got := h.wait("a", now, maxStatusHoldFactor*d, true); got != maxStatusHoldFactor*d {
		t.Fatalf("hub stage: wait = %v, want %v", got, maxStatusHoldFactor*d)
	}
	if got := h.wait("a", now.Add(3*time.Second), d, false); got != d-3*time.Second {
		t.Fatalf("agent stage after 3s of hub stage: wait = %v, want %v", got, d-3*time.Second)
	}
}
