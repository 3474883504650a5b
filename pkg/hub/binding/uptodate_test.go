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

package binding

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

func TestWorksUpToDate(t *testing.T) {
	scheduled := &workv1alpha1.ResourceBinding{Spec: workv1alpha1.ResourceBindingSpec{Clusters: []workv1alpha1.TargetCluster{{Name: "member2", Replicas: 3}}}}
	empty := &workv1alpha1.ResourceBinding{}
	for _, c := range []struct {
		name     string
		binding  *workv1alpha1.ResourceBinding
		copies   []workCopy
		status   metav1.ConditionStatus
		reason   string
		contains string
	}{
		{name: "every Work at the template's generation", binding: scheduled,
			copies: []workCopy{{cluster: "member2", generation: 2}}, status: metav1.ConditionTrue, reason: ReasonUpToDate},
		{name: "written this sync, the informer still behind", binding: scheduled,
			copies: []workCopy{{cluster: "member2", generation: 1, current: true}}, status: metav1.ConditionTrue, reason: ReasonUpToDate},
		{name: "evicting copy of an older generation", binding: scheduled,
			copies: []workCopy{{cluster: "member2", generation: 2, current: true}, {cluster: "member1", generation: 1, evicting: true}},
			status: metav1.ConditionFalse, reason: ReasonStaleCopies,
			contains: "cluster member1 keeps the copy of template generation 1 while its graceful eviction task lasts (the template is at generation 2)"},
		{name: "evicting copy of the current generation, nothing scheduled", binding: empty,
			copies: []workCopy{{cluster: "member1", generation: 2, evicting: true}}, status: metav1.ConditionFalse, reason: ReasonNoClusterScheduled},
		{name: "stale copies win over no cluster scheduled", binding: empty,
			copies: []workCopy{{cluster: "member1", generation: 1, evicting: true}}, status: metav1.ConditionFalse, reason: ReasonStaleCopies, contains: "member1"},
		{name: "a targeted Work not updated (override failed) is stale", binding: scheduled,
			copies: []workCopy{{cluster: "member2", generation: 1}}, status: metav1.ConditionFalse, reason: ReasonStaleCopies,
			contains: "cluster member2 runs the copy of template generation 1"},
		{name: "a Work of an older hub has no generation", binding: empty,
			copies: []workCopy{{cluster: "member1", evicting: true}}, status: metav1.ConditionFalse, reason: ReasonStaleCopies,
			contains: "an unknown template generation"},
		{name: "nothing at all", binding: empty, status: metav1.ConditionFalse, reason: ReasonNoClusterScheduled},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := worksUpToDate(c.binding, 2, c.copies)
			if got.Type != workv1alpha1.BindingConditionWorksUpToDate || got.Status != c.status || got.Reason != c.reason || !strings.Contains(got.Message, c.contains) {
				t.Errorf("worksUpToDate = %s %s %q, want %s %s containing %q", got.Status, got.Reason, got.Message, c.status, c.reason, c.contains)
			}
		})
	}
}

// Stale copies on thousands of clusters with long names: the message stays
// within what a condition may hold, and says how many it left out.
func TestWorksUpToDateMessageIsBounded(t *testing.T) {
	var copies []workCopy
	for i := range 3000 {
		copies = append(copies, workCopy{cluster: fmt.Sprintf("%0250d", i), generation: 1})
	}
	got := worksUpToDate(&workv1alpha1.ResourceBinding{}, 2, copies)
	if n := utf8.RuneCountInString(got.Message); n > statuslimits.MaxSummary || !strings.Contains(got.Message, "more clusters") ||
		!strings.HasSuffix(got.Message, "(the template is at generation 2)") {
		t.Fatalf("message of %d characters: %.200s … %s", n, got.Message, got.Message[max(0, len(got.Message)-120):])
	}
}
