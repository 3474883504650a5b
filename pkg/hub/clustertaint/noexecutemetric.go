package clustertaint

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
)

// noExecuteSince is when the oldest NoExecute taint in taints was added, and
// whether there is one. A taint without timeAdded (an admin's, written by
// hand) counts from seen: when the hub first saw the cluster carry one.
func noExecuteSince(taints []corev1.Taint, seen time.Time) (time.Time, bool) {
	var since time.Time
	found := false
	for _, t := range taints {
		if t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		at := seen
		if t.TimeAdded != nil {
			at = t.TimeAdded.Time
		}
		if !found || at.Before(since) {
			since = at
		}
		found = true
	}
	return since, found
}

// noExecuteMetrics sets flotilla_hub_cluster_noexecute_taint_since_timestamp_seconds
// for every cluster with a NoExecute taint, whoever added it (this
// controller, a ClusterTaintPolicy or an admin), and drops the series of the
// others. seen remembers when a cluster's NoExecute taints were first seen;
// it is updated in place. Called with the guard's periodic list.
func noExecuteMetrics(m *hubmetrics.Metrics, clusters []*clusterv1alpha1.Cluster, seen map[string]time.Time, now time.Time) {
	tainted := make(map[string]bool, len(clusters))
	for _, cl := range clusters {
		first, ok := seen[cl.Name]
		if !ok {
			first = now
		}
		since, found := noExecuteSince(cl.Spec.Taints, first)
		if !found {
			continue
		}
		tainted[cl.Name] = true
		seen[cl.Name] = first
		m.NoExecuteSince.WithLabelValues(cl.Name).Set(float64(since.UnixNano()) / 1e9)
	}
	for name := range seen {
		if !tainted[name] {
			delete(seen, name)
			m.NoExecuteSince.DeleteLabelValues(name)
		}
	}
}
