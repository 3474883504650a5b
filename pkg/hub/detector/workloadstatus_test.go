package detector

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// The template's workloadStatus holds the honest clusters' aggregate when
// one cluster's status makes the rule fail, and WorkloadStatusIncomplete
// names that cluster; once it reports a status the rule reads, the
// condition goes. Before, the whole workloadStatus was blank, silently.
func TestMirrorBindingNamesTheClusterLeftOut(t *testing.T) {
	interp := resourceinterpreter.New()
	interp.Set(&configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "widgets"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target: configv1alpha1.CustomizationTarget{APIVersion: "example.com/v1", Kind: "Widget"},
			Customizations: configv1alpha1.CustomizationRules{StatusAggregation: &configv1alpha1.StatusAggregation{
				Expression: `{"replicas": statuses.map(s, int(s.status.replicas)).sum()}`}}}})
	item := func(cluster, status string) workv1alpha1.AggregatedStatusItem {
		return workv1alpha1.AggregatedStatusItem{ClusterName: cluster, Status: &runtime.RawExtension{Raw: []byte(status)}}
	}
	binding := &workv1alpha1.ResourceBinding{Spec: workv1alpha1.ResourceBindingSpec{
		Resource: workv1alpha1.ObjectReference{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "default", Name: "web"}},
		Status: workv1alpha1.ResourceBindingStatus{AggregatedStatus: []workv1alpha1.AggregatedStatusItem{
			item("a", `{"replicas":2}`), item("liar", `{"replicas":"9223372036854775807"}`), item("c", `{"replicas":3}`)}}}
	var status workv1alpha1.ResourceTemplateStatus
	MirrorBinding(interp, &status, binding, 4)
	if status.WorkloadStatus == nil || string(status.WorkloadStatus.Raw) != `{"replicas":5}` {
		t.Fatalf("workloadStatus = %v, want the honest clusters' 5", status.WorkloadStatus)
	}
	cond := meta.FindStatusCondition(status.Conditions, workobjects.TemplateConditionWorkloadStatusIncomplete)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != ReasonStatusesLeftOut || cond.ObservedGeneration != 4 ||
		!strings.Contains(cond.Message, "1 of 3 clusters") || !strings.Contains(cond.Message, "liar: ") || strings.Contains(cond.Message, "a: ") {
		t.Fatalf("condition %+v", cond)
	}
	binding.Status.AggregatedStatus[1] = item("liar", `{"replicas":1}`)
	MirrorBinding(interp, &status, binding, 4)
	if string(status.WorkloadStatus.Raw) != `{"replicas":6}` || meta.FindStatusCondition(status.Conditions, workobjects.TemplateConditionWorkloadStatusIncomplete) != nil {
		t.Fatalf("after the fix: %s, %+v", status.WorkloadStatus.Raw, status.Conditions)
	}
}

func TestWorkloadStatusIncomplete(t *testing.T) {
	many := make([]resourceinterpreter.LeftOutStatus, 2000)
	for k := range many {
		many[k] = resourceinterpreter.LeftOutStatus{ClusterName: fmt.Sprintf("member%d", k), Reason: strings.Repeat("r", 256)}
	}
	stand, note := statuslimits.WorkloadStatus(&runtime.RawExtension{Raw: []byte(`{"x":"` + strings.Repeat("x", statuslimits.MaxWorkloadStatus) + `"}`)})
	for _, tc := range []struct {
		name       string
		agg        resourceinterpreter.Aggregate
		wantReason string
		wantIn     []string
	}{
		{"complete", resourceinterpreter.Aggregate{Status: &runtime.RawExtension{Raw: []byte(`{}`)}}, "", nil},
		{"nothing reported", resourceinterpreter.Aggregate{}, "", nil},
		{"left out", resourceinterpreter.Aggregate{LeftOut: many[:2]}, ReasonStatusesLeftOut, []string{"2 of 5 clusters", "member0: rrr", "member1: rrr"}},
		{"too many left out to list", resourceinterpreter.Aggregate{LeftOut: many}, ReasonStatusesLeftOut, []string{"2000 of 5 clusters", "more clusters"}},
		{"too large", resourceinterpreter.Aggregate{Status: stand, TooLarge: note}, ReasonWorkloadStatusTooLarge, []string{"over the limit of 131072 bytes"}},
		{"failed", resourceinterpreter.Aggregate{Failed: strings.Repeat("cost ", 1000), LeftOut: many[:1]}, ReasonAggregationFailed,
			[]string{"no aggregate", "1 of 5 clusters", "member0"}},
	} {
		cond := workloadStatusIncomplete(tc.agg, 5, 7)
		if tc.wantReason == "" {
			if cond != nil {
				t.Errorf("%s: %+v, want none", tc.name, cond)
			}
			continue
		}
		if cond == nil || cond.Reason != tc.wantReason || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != 7 {
			t.Errorf("%s: %+v, want reason %s", tc.name, cond, tc.wantReason)
			continue
		}
		if n := utf8.RuneCountInString(cond.Message); n > statuslimits.MaxSummary {
			t.Errorf("%s: message of %d characters", tc.name, n)
		}
		for _, w := range tc.wantIn {
			if !strings.Contains(cond.Message, w) {
				t.Errorf("%s: message %q lacks %q", tc.name, cond.Message, w)
			}
		}
	}
	// The stand-in is what the template shows.
	var m map[string]string
	if err := json.Unmarshal(stand.Raw, &m); err != nil || m[statuslimits.LeftOutField] != note {
		t.Errorf("stand-in %s", stand.Raw)
	}
}
