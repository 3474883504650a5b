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

package taintmanager

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// Verdict is what a cluster's NoExecute taints mean for one workload.
type Verdict struct {
	// Evict is true when the workload must leave the cluster now.
	Evict bool
	// After is how long until it must, when it tolerates the taints for a
	// while (0: it tolerates them for good, or there are none).
	After time.Duration
	// Taint is the taint that decides, for messages.
	Taint *corev1.Taint
	// DueAt is when an eviction fell due (the taint's timeAdded plus the
	// toleration; now for an untolerated taint).
	DueAt time.Time
}

// Defaults are the tolerations a placement without its own toleration for
// the not-ready / unreachable NoExecute taints is treated as having. They
// are applied at evaluation and never written into the user's policy.
type Defaults struct {
	NotReadyTolerationSeconds    int64
	UnreachableTolerationSeconds int64
}

// WithDefaults returns tolerations plus the default ones the placement
// lacks.
func (d Defaults) WithDefaults(tolerations []corev1.Toleration) []corev1.Toleration {
	out := append([]corev1.Toleration(nil), tolerations...)
	for _, def := range []struct {
		key     string
		seconds int64
	}{{clusterv1alpha1.TaintClusterNotReady, d.NotReadyTolerationSeconds}, {clusterv1alpha1.TaintClusterUnreachable, d.UnreachableTolerationSeconds}} {
		probe := &corev1.Taint{Key: def.key, Effect: corev1.TaintEffectNoExecute}
		if tolerates(tolerations, probe) {
			continue
		}
		seconds := def.seconds
		out = append(out, corev1.Toleration{Key: def.key, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds})
	}
	return out
}

// Decide judges taints against tolerations (defaults already added) at
// now, the node lifecycle controller's rule: a NoExecute taint no
// toleration tolerates evicts at once; tolerated ones evict when the
// shortest tolerationSeconds among the matching tolerations has passed
// since the taint's timeAdded; no tolerationSeconds means for good. A taint
// without timeAdded counts from now: callers pass taints filled in by the
// TaintClock, so that never happens on a second pass.
func Decide(tolerations []corev1.Toleration, taints []corev1.Taint, now time.Time) Verdict {
	var soonest *Verdict
	for i := range taints {
		t := &taints[i]
		if t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		var minSeconds *int64
		matched := false
		for j := range tolerations {
			tol := &tolerations[j]
			if !tol.ToleratesTaint(klog.Background(), t, false) {
				continue
			}
			matched = true
			if tol.TolerationSeconds != nil && (minSeconds == nil || *tol.TolerationSeconds < *minSeconds) {
				minSeconds = tol.TolerationSeconds
			}
		}
		if !matched {
			due := now
			if t.TimeAdded != nil {
				due = t.TimeAdded.Time
			}
			return Verdict{Evict: true, Taint: t, DueAt: due}
		}
		if minSeconds == nil {
			continue
		}
		added := now
		if t.TimeAdded != nil {
			added = t.TimeAdded.Time
		}
		due := added.Add(time.Duration(max(*minSeconds, 0)) * time.Second)
		left := due.Sub(now)
		if left <= 0 {
			return Verdict{Evict: true, Taint: t, DueAt: due}
		}
		if soonest == nil || left < soonest.After {
			soonest = &Verdict{After: left, Taint: t}
		}
	}
	if soonest != nil {
		return *soonest
	}
	return Verdict{}
}

func tolerates(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(klog.Background(), taint, false) {
			return true
		}
	}
	return false
}

func describeTaint(t *corev1.Taint) string {
	if t == nil {
		return ""
	}
	if t.Value != "" {
		return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
	}
	return fmt.Sprintf("%s:%s", t.Key, t.Effect)
}

// SafePurgeMode is the purge mode an eviction may use: Directly never
// removes the last copies while no healthy copy exists elsewhere. When the
// policy says Directly but no target cluster of the binding outside
// evicting reports the current generation Healthy, the eviction is
// Gracefully instead (the old copy stays until the new placement is
// healthy), and downgraded is true so the caller can say so.
func SafePurgeMode(mode policyv1alpha1.PurgeMode, clusters []workv1alpha1.TargetCluster, status []workv1alpha1.AggregatedStatusItem,
	generation int64, evicting func(cluster string) bool) (_ policyv1alpha1.PurgeMode, downgraded bool) {
	mode = policyv1alpha1.NormalizePurgeMode(mode)
	if mode != policyv1alpha1.PurgeModeDirectly {
		return mode, false
	}
	for _, t := range clusters {
		if evicting(t.Name) {
			continue
		}
		for _, item := range status {
			if item.ClusterName == t.Name && item.Health == workv1alpha1.ResourceHealthy && item.ObservedGeneration == generation {
				return mode, false
			}
		}
	}
	return policyv1alpha1.PurgeModeGracefully, true
}
