package failback

import (
	"slices"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// ReasonRolledBack is the eviction-history reason (and the Warning event)
// of a failback that did not become healthy within the failback timeout
// and was rolled back. It is no failure a failback undoes: the workload
// stays where it was until another failure or a rebalance moves it.
const ReasonRolledBack = workv1alpha1.EvictionReasonFailbackRolledBack

// AnnotationClustersBefore records, on a binding whose failback started,
// the placement (JSON targets) it had before: a rollback restores the
// replicas of the clusters the failback grew (an overflow come-back
// grows clusters that already ran the workload; their Failback tasks
// only record the clusters it shrank).
const AnnotationClustersBefore = "failback.flotilla.io/clusters-before"

// DefaultTimeout bounds how long a failback may wait for its new placement
// to become healthy (hub flag --failback-timeout).
const DefaultTimeout = 10 * time.Minute

// DefaultMaxConcurrentPerNamespace is how many failbacks one namespace may
// have in progress at once (hub flag --failback-max-concurrent-per-namespace).
const DefaultMaxConcurrentPerNamespace = 2

// failbackTasks are the binding's open graceful tasks of reason Failback.
func failbackTasks(spec *workv1alpha1.ResourceBindingSpec) []workv1alpha1.GracefulEvictionTask {
	var out []workv1alpha1.GracefulEvictionTask
	for _, t := range spec.GracefulEvictionTasks {
		if t.Reason == workv1alpha1.EvictionReasonFailback {
			out = append(out, t)
		}
	}
	return out
}

// Overdue says whether the binding's failback has waited longer than
// timeout for its new placement to become healthy (its oldest Failback
// task is older; the graceful eviction controller ends those tasks once it
// is healthy), and otherwise how long until it will have (0: no failback
// task, nothing to wait for).
func Overdue(spec *workv1alpha1.ResourceBindingSpec, timeout time.Duration, now time.Time) (bool, time.Duration) {
	var oldest *metav1.Time
	for _, t := range failbackTasks(spec) {
		if t.CreationTimestamp != nil && (oldest == nil || t.CreationTimestamp.Before(oldest)) {
			oldest = t.CreationTimestamp
		}
	}
	if oldest == nil || timeout <= 0 {
		return false, 0
	}
	left := oldest.Add(timeout).Sub(now)
	if left <= 0 {
		return true, 0
	}
	return false, left
}

// Rollback undoes an overdue failback in spec: the placement it had before
// (each cluster that shrank gets its old replicas back from its Failback
// task, a cluster it returned to leaves), the Failback tasks go, and each
// cluster it returned to gets an eviction-history entry of reason
// ReasonRolledBack (the scheduler avoids it for a while; a failback does
// not return to it). A cluster the failback grew (before, when recorded,
// says what it ran) gets its old replicas back and an entry of the same
// reason, which only keeps failbacks from growing it again. It returns
// the clusters it left and those it lowered.
func Rollback(spec *workv1alpha1.ResourceBindingSpec, before []workv1alpha1.TargetCluster, now time.Time) (left, lowered []string) {
	tasks := failbackTasks(spec)
	var names []string
	for _, t := range tasks {
		names = append(names, t.ClustersBeforeFailover...)
	}
	if len(names) == 0 {
		// No record of the old placement: keep every cluster, undo the
		// shrinks only.
		for _, t := range tasks {
			names = append(names, t.FromCluster)
		}
		for _, c := range spec.Clusters {
			names = append(names, c.Name)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	current := map[string]int32{}
	for _, c := range spec.Clusters {
		current[c.Name] = c.Replicas
	}
	var clusters []workv1alpha1.TargetCluster
	for _, name := range names {
		i := slices.IndexFunc(tasks, func(t workv1alpha1.GracefulEvictionTask) bool { return t.FromCluster == name })
		switch n, placed := current[name]; {
		case i >= 0 && tasks[i].Replicas != nil:
			clusters = append(clusters, workv1alpha1.TargetCluster{Name: name, Replicas: *tasks[i].Replicas})
		case placed:
			if j := slices.IndexFunc(before, func(t workv1alpha1.TargetCluster) bool { return t.Name == name }); j >= 0 && n > before[j].Replicas && spec.Replicas > 0 {
				n = before[j].Replicas
				lowered = append(lowered, name)
			}
			clusters = append(clusters, workv1alpha1.TargetCluster{Name: name, Replicas: n})
		}
	}
	for _, c := range spec.Clusters {
		if !slices.Contains(names, c.Name) {
			left = append(left, c.Name)
		}
	}
	sort.Strings(left)
	sort.Slice(clusters, func(i, j int) bool { return clusters[i].Name < clusters[j].Name })
	spec.Clusters = clusters
	spec.GracefulEvictionTasks = slices.DeleteFunc(slices.Clone(spec.GracefulEvictionTasks), func(t workv1alpha1.GracefulEvictionTask) bool {
		return t.Reason == workv1alpha1.EvictionReasonFailback
	})
	if len(spec.GracefulEvictionTasks) == 0 {
		spec.GracefulEvictionTasks = nil
	}
	stamp := metav1.NewTime(now)
	for _, name := range append(slices.Clone(left), lowered...) {
		spec.EvictionHistory = append(spec.EvictionHistory, workv1alpha1.EvictionHistoryEntry{ClusterName: name, Reason: ReasonRolledBack, EvictedAt: stamp})
	}
	return left, lowered
}
