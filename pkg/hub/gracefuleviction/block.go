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

package gracefuleviction

import (
	"time"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// CancellableAt is Cancellable with failover.application.blockPredecessorSeconds
// judged at now: a cluster the application failed over from is not taken
// back by undoing its eviction while the block lasts, any more than the
// scheduler would place it there. (Undoing it would also drop the history
// entry that is the block.) The task then ends as any other: when a new
// placement is healthy, or at its grace period.
func CancellableAt(task *workv1alpha1.GracefulEvictionTask, binding *workv1alpha1.ResourceBinding,
	cluster *clusterv1alpha1.Cluster, oldWorkLive bool, now time.Time) Cancellation {
	for _, b := range workobjects.PredecessorBlocks(&binding.Spec, now) {
		if b.Cluster != task.FromCluster {
			continue
		}
		if b.Forever() {
			return Cancellation{Why: "blockPredecessorSeconds 0 blocks the cluster until its eviction history entry is removed"}
		}
		return Cancellation{Why: "blockPredecessorSeconds blocks the cluster until " + b.Until.UTC().Format(time.RFC3339)}
	}
	return Cancellable(task, binding, cluster, oldWorkLive)
}
