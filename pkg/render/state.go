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

package render

import (
	"encoding/json"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/statepreservation"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// PreservedLabels is the failover state the copy on cluster carries
// (stateful failover). A copy is a replacement of an eviction when the
// cluster was not among the task's clustersBeforeFailover: it gets the
// task's preservedLabelState, whatever the task's purge mode and however
// many clusters replace the evicted one (Karmada injects only for one
// cluster replacing one, and only with Directly). With several such tasks
// the newest wins a key, and their state replaces what the copy carried
// before. With none, the copy keeps what its Work recorded: the labels stay
// for the copy's life, after its task has ended.
func PreservedLabels(tasks []workv1alpha1.GracefulEvictionTask, cluster string, recorded map[string]string) map[string]string {
	var applying []*workv1alpha1.GracefulEvictionTask
	for i := range tasks {
		t := &tasks[i]
		// A task without clustersBeforeFailover cannot say which copies are
		// new; an old copy must not get another's state.
		if len(t.PreservedLabelState) == 0 || len(t.ClustersBeforeFailover) == 0 || slices.Contains(t.ClustersBeforeFailover, cluster) {
			continue
		}
		applying = append(applying, t)
	}
	if len(applying) == 0 {
		if len(recorded) == 0 {
			return nil
		}
		return maps.Clone(recorded)
	}
	slices.SortStableFunc(applying, func(a, b *workv1alpha1.GracefulEvictionTask) int {
		switch {
		case a.CreationTimestamp == nil || b.CreationTimestamp == nil:
			return 0
		case a.CreationTimestamp.Before(b.CreationTimestamp):
			return -1
		case b.CreationTimestamp.Before(a.CreationTimestamp):
			return 1
		}
		return 0
	})
	out := map[string]string{}
	for _, t := range applying {
		maps.Copy(out, t.PreservedLabelState)
	}
	return out
}

// recordedState is the state the cluster's current Work recorded; nil
// when there is no Work, when it is another binding's, or when it is being
// deleted (its copy is going; a new one starts afresh).
func recordedState(binding *workv1alpha1.ResourceBinding, current *workv1alpha1.Work) map[string]string {
	if current == nil || !workobjects.OwnsWork(binding, current) {
		return nil
	}
	raw := current.Annotations[workv1alpha1.AnnotationPreservedLabelState]
	if current.DeletionTimestamp != nil || raw == "" {
		return nil
	}
	var recorded map[string]string
	if json.Unmarshal([]byte(raw), &recorded) != nil {
		return nil
	}
	return recorded
}

// injectState puts the failover state preserved into manifest's labels
// (over the template's own) and returns the annotation that records it on
// the Work, "" when there is none.
func injectState(preserved map[string]string, manifest *unstructured.Unstructured) string {
	if len(preserved) == 0 {
		return ""
	}
	// A value that cannot be a label (a checkpoint path with slashes) goes
	// on the copy as an annotation of the same key.
	asLabels, asAnnotations := statepreservation.Split(preserved)
	if len(asLabels) > 0 {
		labels := manifest.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, asLabels)
		manifest.SetLabels(labels)
	}
	if len(asAnnotations) > 0 {
		annotations := manifest.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		maps.Copy(annotations, asAnnotations)
		manifest.SetAnnotations(annotations)
	}
	b, _ := json.Marshal(preserved) // a map of strings always marshals
	return string(b)
}
