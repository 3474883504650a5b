// Package health holds the health interpretation both agent probes share:
// flap damping of an observed condition by success and failure thresholds.
package health

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// Observation is one probe's verdict, in the shape of a condition.
type Observation struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// ThresholdTracker turns a stream of observations into the effective one: a
// change of status takes effect only after the new status has held without
// interruption for the failure threshold (to not-True) or the success
// threshold (to True). A blip shorter than the threshold changes nothing.
//
// Every status change is damped, whatever its cause: a credential error
// (401/403) is a failure like any other and must hold for the threshold too
// (Karmada issue #7408 marked a cluster NotReady on the first 401).
//
// A ThresholdTracker is not safe for concurrent use.
type ThresholdTracker struct {
	clock            clock.PassiveClock
	successThreshold time.Duration
	failureThreshold time.Duration

	current *Observation
	// pendingSince is when observations first disagreed with current, and
	// pendingStatus the status they have agreed on since.
	pendingStatus metav1.ConditionStatus
	pendingSince  time.Time
}

// NewThresholdTracker returns a tracker with no effective state yet.
func NewThresholdTracker(c clock.PassiveClock, successThreshold, failureThreshold time.Duration) *ThresholdTracker {
	return &ThresholdTracker{clock: c, successThreshold: successThreshold, failureThreshold: failureThreshold}
}

// Observe records an observation and returns the effective one. The first
// observation takes effect at once: there is nothing to damp against (an agent
// that starts on a broken cluster must not report it healthy meanwhile).
func (t *ThresholdTracker) Observe(obs Observation) Observation {
	now := t.clock.Now()
	switch {
	case t.current == nil, obs.Status == t.current.Status:
		// Same status: take the fresh reason and message (NotReady may
		// become NotReachable) and forget any pending change.
		t.current = &obs
		t.pendingStatus = ""
	case obs.Status != t.pendingStatus:
		t.pendingStatus = obs.Status
		t.pendingSince = now
		fallthrough
	default:
		threshold := t.failureThreshold
		if obs.Status == metav1.ConditionTrue {
			threshold = t.successThreshold
		}
		if now.Sub(t.pendingSince) >= threshold {
			t.current = &obs
			t.pendingStatus = ""
		}
	}
	return *t.current
}

// Current returns the effective observation and whether there is one.
func (t *ThresholdTracker) Current() (Observation, bool) {
	if t.current == nil {
		return Observation{}, false
	}
	return *t.current, true
}

// Seed sets the effective observation without damping, when there is none
// yet: a new leader continues from the status its predecessor reported, so
// one bad probe right after a leader change is still only a blip.
func (t *ThresholdTracker) Seed(obs Observation) {
	if t.current == nil {
		t.current = &obs
		t.pendingStatus = ""
	}
}
