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
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/statepreservation"
)

// preservedState is what an eviction from cluster carries to the copies
// that replace it (failover.application.statePreservation), read from the
// last status the hub saw of the unhealthy copy. A rule that cannot be
// read is reported and skipped: the failover never waits for state.
func (c *Controller) preservedState(binding *workv1alpha1.ResourceBinding, cluster string) map[string]string {
	f := binding.Spec.Failover
	if f == nil || f.Application == nil {
		return nil
	}
	labels, err := statepreservation.ForEviction(f.Application.StatePreservation, binding.Status.AggregatedStatus, cluster)
	statepreservation.Report(c.opts.Recorder, binding, cluster, labels, err)
	return labels
}
