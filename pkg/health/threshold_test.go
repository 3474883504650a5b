package health

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

var (
	ready        = Observation{Status: metav1.ConditionTrue, Reason: "ClusterReady"}
	notReady     = Observation{Status: metav1.ConditionFalse, Reason: "ClusterNotReady"}
	notReachable = Observation{Status: metav1.ConditionFalse, Reason: "ClusterNotReachable", Message: "401 Unauthorized"}
)

func TestThresholdTracker(t *testing.T) {
	type step struct {
		after time.Duration // advance the clock by this much first
		obs   Observation
		want  Observation
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"first observation takes effect at once", []step{
			{0, notReady, notReady},
		}},
		{"failure flips only after the failure threshold", []step{
			{0, ready, ready},
			{10 * time.Second, notReachable, ready}, // failing since t=10s
			{20 * time.Second, notReachable, ready},
			{9 * time.Second, notReachable, ready},
			{1 * time.Second, notReachable, notReachable}, // held 30s
		}},
		{"a blip shorter than the threshold changes nothing", []step{
			{0, ready, ready},
			{10 * time.Second, notReady, ready},
			{5 * time.Second, notReady, ready},
			{10 * time.Second, ready, ready},
			// The blip's time does not count towards the next failure.
			{10 * time.Second, notReady, ready},
			{29 * time.Second, notReady, ready},
			{1 * time.Second, notReady, notReady},
		}},
		{"credential errors respect the threshold too", []step{
			{0, ready, ready},
			{0, notReachable, ready},
			{29 * time.Second, notReachable, ready},
		}},
		{"recovery uses the success threshold", []step{
			{0, notReady, notReady},
			{10 * time.Second, ready, notReady}, // healthy since t=10s
			{19 * time.Second, ready, notReady},
			{1 * time.Second, ready, ready}, // held 20s
		}},
		{"reason changes within one status take effect at once", []step{
			{0, notReady, notReady},
			{time.Second, notReachable, notReachable},
		}},
		{"failures with different reasons accumulate", []step{
			{0, ready, ready},
			{0, notReady, ready},
			{20 * time.Second, notReachable, ready},
			{10 * time.Second, notReady, notReady},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
			tracker := NewThresholdTracker(clock, 20*time.Second, 30*time.Second)
			for i, s := range tc.steps {
				clock.SetTime(clock.Now().Add(s.after))
				if got := tracker.Observe(s.obs); got != s.want {
					t.Fatalf("step %d: Observe(%v) = %v, want %v", i, s.obs, got, s.want)
				}
			}
		})
	}
}

func TestThresholdTrackerZeroThresholdsFollowAtOnce(t *testing.T) {
	tracker := NewThresholdTracker(clocktesting.NewFakePassiveClock(time.Unix(0, 0)), 0, 0)
	for _, obs := range []Observation{ready, notReady, ready} {
		if got := tracker.Observe(obs); got != obs {
			t.Fatalf("Observe(%v) = %v", obs, got)
		}
	}
	if cur, ok := tracker.Current(); !ok || cur != ready {
		t.Fatalf("Current() = %v, %v", cur, ok)
	}
}
