package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// With --priorities N > 1 the workloads get N priorities (issue 39):
// workload i has level i mod N (so every level arrives interleaved with
// the others), its Deployment the label benchPriorityLabel=p<level>, and
// one policy per level selects it by that label with
// spec.schedulePriority naming the PriorityClass of the level (value
// priorityValue(level); the highest level is the most critical). The
// report gives "running elsewhere" per level.

const benchPriorityLabel = "bench.flotilla.io/priority"

func priorityClassName(level int) string  { return fmt.Sprintf("bench-evacuation-p%d", level) }
func priorityPolicyName(level int) string { return fmt.Sprintf("evacuation-p%d", level) }
func priorityValue(level int) int32       { return int32(1000 * (level + 1)) }

// levelOf is the priority level of template i.
func (b *bench) levelOf(i int) int {
	if b.o.priorities < 2 {
		return 0
	}
	return i % b.o.priorities
}

// createPriorityPolicies makes the PriorityClasses and one policy per
// level, each with spec's placement.
func (b *bench) createPriorityPolicies(ctx context.Context, spec policyv1alpha1.PropagationSpec) error {
	for level := range b.o.priorities {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: priorityClassName(level), Labels: map[string]string{benchLabel: benchValue}},
			Value: priorityValue(level), Description: "hack/bench/evacuation"}
		if _, err := b.kc.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		s := *spec.DeepCopy()
		s.ResourceSelectors = []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment",
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{benchPriorityLabel: fmt.Sprintf("p%d", level)}}}}
		s.SchedulePriority = &policyv1alpha1.SchedulePriority{PriorityClassSource: policyv1alpha1.KubePriorityClass, PriorityClassName: priorityClassName(level)}
		policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: priorityPolicyName(level), Namespace: namespace}, Spec: s}
		if _, err := b.fc.PolicyV1alpha1().PropagationPolicies(namespace).Create(ctx, policy, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

func (b *bench) deletePriorityPolicies(ctx context.Context) {
	for level := range b.o.priorities {
		_ = b.fc.PolicyV1alpha1().PropagationPolicies(namespace).Delete(ctx, priorityPolicyName(level), metav1.DeleteOptions{})
		_ = b.kc.SchedulingV1().PriorityClasses().Delete(ctx, priorityClassName(level), metav1.DeleteOptions{})
	}
}

// reportPriorities prints "running elsewhere" per level, from expiry, and
// whether every workload of the highest level ran elsewhere before the
// median one of the lowest (p99 high < p50 low). Call with b.mu held.
func (b *bench) reportPriorities(expiry time.Time) {
	if b.o.priorities < 2 {
		return
	}
	levels := make([][]time.Duration, b.o.priorities)
	missing := make([]int, b.o.priorities)
	for i, name := range templateNames(b.o.workloads) {
		level := b.levelOf(i)
		if t, ok := b.replaced[workobjects.BindingName("Deployment", name)]; ok {
			levels[level] = append(levels[level], t.Sub(expiry))
		} else {
			missing[level]++
		}
	}
	r := func(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
	pct := func(l []time.Duration, p float64) time.Duration {
		if len(l) == 0 {
			return 0
		}
		return l[min(int(float64(len(l))*p), len(l)-1)]
	}
	fmt.Printf("\nRunning elsewhere by priority (PriorityClass value; times from the Lease expiry):\n\n")
	fmt.Printf("| priority | workloads | first | p50 | p90 | p99 | last | not moved |\n|---|---|---|---|---|---|---|---|\n")
	for level := b.o.priorities - 1; level >= 0; level-- {
		l := levels[level]
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		if len(l) == 0 {
			fmt.Printf("| %d | 0 | — | — | — | — | — | %d |\n", priorityValue(level), missing[level])
			continue
		}
		fmt.Printf("| %d | %d | %s | %s | %s | %s | %s | %d |\n", priorityValue(level), len(l), r(l[0]), r(pct(l, 0.5)), r(pct(l, 0.9)),
			r(pct(l, 0.99)), r(l[len(l)-1]), missing[level])
	}
	high, low := levels[b.o.priorities-1], levels[0]
	if len(high) > 0 && len(low) > 0 && missing[b.o.priorities-1] == 0 {
		verdict := "holds"
		if pct(high, 0.99) >= pct(low, 0.5) {
			verdict = "BROKEN"
		}
		fmt.Printf("\np99 of the highest priority (%s) < p50 of the lowest (%s): %s\n", r(pct(high, 0.99)), r(pct(low, 0.5)), verdict)
	}
}
