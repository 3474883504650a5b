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

package scheduler

import (
	"context"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/bindingstatus"
	"github.com/flotilla-io/flotilla/pkg/hub/scheduler/core"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// unblockMargin is added to a block's end when the binding is requeued
// for it, so the filter, judging at the clock's now, sees it ended.
const unblockMargin = 100 * time.Millisecond

// requeueAtUnblock brings the binding back when its first
// blockPredecessorSeconds block ends: the cluster may take it again (an
// unschedulable binding, a Duplicated one), and the Scheduled condition
// must stop saying it is blocked. A timer per binding, not a poll.
func (c *Controller) requeueAtUnblock(key string, binding *workv1alpha1.ResourceBinding) {
	if d, ok := workobjects.NextUnblock(&binding.Spec, c.opts.Clock.Now()); ok {
		c.queue.AddAfter(key, d+unblockMargin)
	}
}

// blockNote is what the Scheduled condition adds about blocked clusters:
// "; blocked after an application failover: member1 until ..." or "".
func blockNote(spec *workv1alpha1.ResourceBindingSpec, now time.Time) string {
	if note := core.DescribeBlocks(core.Input{Spec: spec, Now: now}); note != "" {
		return "; " + note
	}
	return ""
}

// refreshBlockNote rewrites a Scheduled=True message whose note about
// blocked clusters no longer holds (a block ended, or a new one began,
// with nothing to reschedule).
func (c *Controller) refreshBlockNote(ctx context.Context, binding *workv1alpha1.ResourceBinding) error {
	cond := meta.FindStatusCondition(binding.Status.Conditions, workv1alpha1.BindingConditionScheduled)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != ReasonScheduled {
		return nil
	}
	note := blockNote(&binding.Spec, c.opts.Clock.Now())
	had := strings.Contains(cond.Message, "; blocked after an application failover")
	if note == "" && !had || note != "" && strings.HasSuffix(cond.Message, note) {
		return nil
	}
	return c.setScheduled(ctx, binding, metav1.ConditionTrue, ReasonScheduled,
		"scheduled to "+describe(binding.Spec.Clusters)+note, nil, binding.Status.SchedulerObservedAffinityName, nil, bindingstatus.Settled)
}
