package detector

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	bindingctl "github.com/flotilla-io/flotilla/pkg/hub/binding"
	"github.com/flotilla-io/flotilla/pkg/hub/bindingstatus"
)

// DefaultStatusHold bounds how long the template's status may lag its
// binding while the binding is in flight (see inFlight). A settled status
// is written at once; an in-flight one only once it has been held this
// long, so a template that goes from created to applied within the hold
// gets one status write instead of one per step of the pipeline (policy
// matched, scheduled, Works made, each agent's report): those steps were
// most of the detector's writes per template (docs/benchmarks.md, issue
// 20). While the binding stays in flight after such a write, each further
// in-flight write waits twice as long as the one before, up to
// maxStatusHold: a fleet-wide backlog (10,000 templates at once) does not
// turn into one template write per template every hold.
const DefaultStatusHold = 30 * time.Second

// maxStatusHoldFactor caps the doubling: at most 8 holds (4 min by default).
const maxStatusHoldFactor = 8

// unshownHoldFactor bounds the hold of a template whose binding shows no
// status yet, in holds. The binding's writer (bindingstatus) holds that
// status while the hub's own controllers are behind with it, up to
// bindingstatus.MaxBehindFactor holds from the binding's first part, and
// that part comes when the scheduler gets to the binding, which under a
// fleet-wide backlog is minutes after the template's hold began (10,000
// templates at once on a loaded machine: placed up to 13 min after
// create). With 8 holds the template's hold ran out first and it showed
// an in-flight status the binding did not show. Twice the binding's bound
// lets the binding decide: its first status (settled, or in flight once
// its hold ends) releases or shortens this one at once, so this bound only
// guards against a binding that never shows one.
const unshownHoldFactor = 2 * bindingstatus.MaxBehindFactor

// holdFor is how long a template's in-flight status mirrored from binding
// may be held at most, and whether that is a hold in the hub's stages
// (the binding shows no status yet: no Scheduled condition), given the
// hold for a binding that waits for its agents.
func holdFor(base time.Duration, binding *workv1alpha1.ResourceBinding) (time.Duration, bool) {
	if binding != nil && meta.FindStatusCondition(binding.Status.Conditions, workv1alpha1.BindingConditionScheduled) == nil {
		return unshownHoldFactor * base, true
	}
	return base, false
}

// inFlight says whether the binding is between two steps of the hub's
// propagation pipeline that follow by themselves: the scheduler has not
// answered yet, the binding controller has not summed up the current
// generation yet, or some cluster's Work is made or being made and its
// agent has not reported the current generation. A status mirrored from
// such a binding is about to be replaced. Everything else is settled:
// no binding, a binding being deleted, unschedulable, fully applied, no
// cluster scheduled, or a copy that failed to apply (an error the user must
// see without delay).
func inFlight(binding *workv1alpha1.ResourceBinding) bool {
	if binding == nil || binding.DeletionTimestamp != nil {
		return false
	}
	scheduled := meta.FindStatusCondition(binding.Status.Conditions, workv1alpha1.BindingConditionScheduled)
	if scheduled == nil {
		return true
	}
	if scheduled.Status != metav1.ConditionTrue {
		return false
	}
	applied := meta.FindStatusCondition(binding.Status.Conditions, workv1alpha1.BindingConditionFullyApplied)
	if applied == nil || applied.ObservedGeneration < binding.Generation {
		return true
	}
	if applied.Status == metav1.ConditionTrue || applied.Reason != bindingctl.ReasonNotFullyApplied || len(binding.Status.AggregatedStatus) == 0 {
		return false
	}
	pending := false
	for _, item := range binding.Status.AggregatedStatus {
		switch {
		case item.Applied && item.ObservedGeneration == binding.Generation:
		case item.Applied:
			// The agent applied an older Work; the current one follows.
			pending = true
		case item.AppliedMessage == bindingctl.MessageWorkNotCreated, item.AppliedMessage == bindingctl.MessageWaitingForAgent:
			pending = true
		default:
			return false
		}
	}
	return pending
}

// holds remembers, per template key, the hold of its in-flight status: when
// it started and how long it lasts. The hold of a key ends (release) when
// its status settles or the template goes.
type holds struct {
	mu sync.Mutex
	of map[string]hold
}

type hold struct {
	start    time.Time
	d        time.Duration
	hubStage bool
}

// wait starts key's hold at now, lasting d, if none runs, and returns how
// long the hold still lasts; 0 means it is over and the status is due.
// A hold started while the binding was in the hub's stages (hubStage, a
// longer d) ends at the earlier of its end and start+d once the binding
// has left them.
func (h *holds) wait(key string, now time.Time, d time.Duration, hubStage bool) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.of == nil {
		h.of = map[string]hold{}
	}
	cur, ok := h.of[key]
	if !ok {
		h.of[key] = hold{start: now, d: d, hubStage: hubStage}
		return d
	}
	if cur.hubStage && !hubStage {
		cur.d, cur.hubStage = min(cur.d, d), false
		h.of[key] = cur
	}
	return max(0, cur.start.Add(cur.d).Sub(now))
}

// written says key's in-flight status was written at now, with base the
// hold's first length: the next in-flight status of the same burst waits
// twice as long as this one did, up to maxStatusHoldFactor × base.
func (h *holds) written(key string, now time.Time, base time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.of == nil {
		h.of = map[string]hold{}
	}
	d := base
	if cur, ok := h.of[key]; ok {
		d = min(2*cur.d, maxStatusHoldFactor*base)
	}
	h.of[key] = hold{start: now, d: d}
}

// release ends key's hold: its status settled, or the template is gone.
func (h *holds) release(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.of, key)
}
