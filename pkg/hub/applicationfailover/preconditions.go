/*
Copyright The Flotilla Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package applicationfailover

import (
	"fmt"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
	"sort"
	"time"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// EventApplicationFailoverWaiting: the application is unhealthy on a
// cluster, but the policy's preConditions do not let that count yet (or at
// all). Recorded once per change of what it waits for.
const EventApplicationFailoverWaiting = "ApplicationFailoverWaiting"

// Verdict is the failover decision for the copy on one cluster.
type Verdict struct {
	// Due: evict now.
	Due bool
	// After is how long until it is due, when only time stands in the way
	// (0: nothing to wait for, or nothing time will change).
	After time.Duration
	// Waiting says why an unhealthy copy does not count (yet) because of
	// the preConditions; empty when they do not hold it back.
	Waiting string
}

// Decide is the decision for the copy on one cluster (item), under the
// policy's tolerationSeconds and preConditions (pre may be nil):
//
//   - only Unhealthy health observed for the binding's current generation
//     counts, from item.unhealthySince (the binding controller keeps it);
//   - healthyState Healthy: a copy that has never been Healthy on the
//     cluster (item.everHealthy) never counts; it is left to be fixed
//     where it is;
//   - delaySeconds: health counts only from firstReportedTime plus the
//     delay, so the toleration runs from whichever is later, the turn to
//     Unhealthy or the end of the delay.
func Decide(item *workv1alpha1.AggregatedStatusItem, generation int64, tolerationSeconds int32,
	pre *policyv1alpha1.PreConditions, now time.Time) Verdict {
	if item == nil || item.Health != workv1alpha1.ResourceUnhealthy || item.UnhealthySince == nil || item.ObservedGeneration != generation {
		return Verdict{}
	}
	start := item.UnhealthySince.Time
	waiting := ""
	if pre != nil {
		if pre.HealthyState == policyv1alpha1.HealthyStateHealthy && !item.EverHealthy {
			return Verdict{Waiting: fmt.Sprintf("cluster %s: the application has never been Healthy there (preConditions.healthyState: Healthy); it is left to be fixed where it is", item.ClusterName)}
		}
		if pre.DelaySeconds != nil && *pre.DelaySeconds > 0 {
			if item.FirstReportedTime == nil {
				// The binding controller stamps it with the first applied
				// report; until then nothing counts, and that write
				// brings the binding back.
				return Verdict{Waiting: fmt.Sprintf("cluster %s: waiting for the first status report (preConditions.delaySeconds: %d)", item.ClusterName, *pre.DelaySeconds)}
			}
			from := item.FirstReportedTime.Add(time.Duration(*pre.DelaySeconds) * time.Second)
			if from.After(start) {
				start = from
			}
			if from.After(now) {
				waiting = fmt.Sprintf("cluster %s: health counts from %s (preConditions.delaySeconds: %d after the first status report)",
					item.ClusterName, from.UTC().Format(time.RFC3339), *pre.DelaySeconds)
			}
		}
	}
	left := start.Add(time.Duration(max(tolerationSeconds, 0)) * time.Second).Sub(now)
	if left <= 0 {
		return Verdict{Due: true}
	}
	return Verdict{After: left, Waiting: waiting}
}

// waitingSummary joins the clusters' waiting reasons into one stable line.
func waitingSummary(waits []string) string {
	sort.Strings(waits)
	return statuslimits.Join(waits, "; ", statuslimits.MaxSummary/2, "clusters")
}
