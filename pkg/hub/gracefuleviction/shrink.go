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
	"fmt"
	"slices"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// endedMessage starts the event of an ended task. A cluster still placed
// was only shrunk gracefully (a rebalance, a failback): its copy stays,
// at its new share; any other task's copy goes.
func endedMessage(task *workv1alpha1.GracefulEvictionTask, binding *workv1alpha1.ResourceBinding) string {
	i := slices.IndexFunc(binding.Spec.Clusters, func(t workv1alpha1.TargetCluster) bool { return t.Name == task.FromCluster })
	if i < 0 || task.Replicas == nil {
		return "Evicted from cluster " + task.FromCluster
	}
	return fmt.Sprintf("Shrank cluster %s from %d to %d replicas (%s)", task.FromCluster, *task.Replicas, binding.Spec.Clusters[i].Replicas, task.Reason)
}
