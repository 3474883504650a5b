package clustertaint

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
)

// taintID is what identifies a taint on one cluster, as in Kubernetes
// (Taint.MatchTaint): key and effect. A value edited by hand is the same
// taint, and keeps its time.
type taintID struct {
	key    string
	effect corev1.TaintEffect
}

// stampTaints returns taints with every timeAdded filled in, and the
// first-seen times to remember for the next call. Karmada's webhook stamps
// timeAdded on admission; the hub has no webhook (and CEL has no clock), so
// a taint written without one (kubectl, most tools) is stamped when the hub
// first sees it:
//   - a taint that carries timeAdded is authoritative (it survives hub
//     restarts) and is remembered;
//   - one without takes the time remembered for its key and effect (a taint
//     rewritten by hand, which loses its timeAdded on the way, keeps its
//     first time), or now when it is new.
//
// Only the taints present are remembered: one removed and added again
// counts afresh. keep, when not nil, names taints left without timeAdded on
// purpose (the never-reported cluster's not-ready NoSchedule taint, whose
// timer must start only once Ready is first reported).
func stampTaints(taints []corev1.Taint, seen map[taintID]time.Time, now time.Time, keep func(corev1.Taint) bool) ([]corev1.Taint, map[taintID]time.Time) {
	next := make(map[taintID]time.Time, len(taints))
	out := make([]corev1.Taint, len(taints))
	for i, t := range taints {
		id := taintID{t.Key, t.Effect}
		switch {
		case t.TimeAdded != nil:
			next[id] = t.TimeAdded.Time
		case keep != nil && keep(t):
		default:
			at, ok := seen[id]
			if !ok {
				at = now.Truncate(time.Second)
			}
			if prev, dup := next[id]; dup && prev.Before(at) {
				at = prev
			}
			t.TimeAdded = &metav1.Time{Time: at}
			next[id] = at
		}
		out[i] = t
	}
	return out, next
}

// neverReportedPlaceholder reports whether t is the not-ready NoSchedule
// taint a cluster that never reported Ready carries without timeAdded
// (builtinTaints): stamping it would start the failover timer at
// registration.
func neverReportedPlaceholder(cluster *clusterv1alpha1.Cluster) func(corev1.Taint) bool {
	return func(t corev1.Taint) bool {
		return t.Key == clusterv1alpha1.TaintClusterNotReady && t.Effect == corev1.TaintEffectNoSchedule &&
			!slices.ContainsFunc(cluster.Status.Conditions, func(c metav1.Condition) bool { return c.Type == clusterv1alpha1.ClusterConditionReady })
	}
}

// TaintClock remembers when the hub first saw each cluster's taints, for
// both writers of the answer: the cluster taint controller, which stamps
// timeAdded into the Cluster, and the taint manager, which must count a
// toleration from the same first sight before that stamp lands (and never
// from "now" on every pass, or a taint without timeAdded would never
// evict). Safe for concurrent use; the zero value is not, use NewTaintClock.
type TaintClock struct {
	clock clock.Clock
	mu    sync.Mutex
	seen  map[string]map[taintID]time.Time
}

// NewTaintClock returns an empty TaintClock reading c (the real clock when nil).
func NewTaintClock(c clock.Clock) *TaintClock {
	if c == nil {
		c = clock.RealClock{}
	}
	return &TaintClock{clock: c, seen: map[string]map[taintID]time.Time{}}
}

// Taints returns cluster's taints with timeAdded filled in (stampTaints),
// remembering the first sight of those that lack it.
func (tc *TaintClock) Taints(cluster *clusterv1alpha1.Cluster) []corev1.Taint {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	out, next := stampTaints(cluster.Spec.Taints, tc.seen[cluster.Name], tc.clock.Now(), neverReportedPlaceholder(cluster))
	if len(next) == 0 {
		delete(tc.seen, cluster.Name)
	} else {
		tc.seen[cluster.Name] = next
	}
	return out
}

// Forget drops what is remembered about a deleted cluster.
func (tc *TaintClock) Forget(cluster string) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	delete(tc.seen, cluster)
}
