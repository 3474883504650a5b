package binding

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestWorksNotApplied(t *testing.T) {
	work := func(ns string, gen int64, cond *metav1.Condition) *workv1alpha1.Work {
		w := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w", Generation: gen}}
		if cond != nil {
			w.Status.Conditions = []metav1.Condition{*cond}
		}
		return w
	}
	applied := func(s metav1.ConditionStatus, gen int64) *metav1.Condition {
		return &metav1.Condition{Type: workv1alpha1.WorkConditionApplied, Status: s, ObservedGeneration: gen}
	}
	deleting := work("flotilla-es-m1", 1, nil)
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		name  string
		works []*workv1alpha1.Work
		want  map[string]map[string]int
	}{
		{"applied at its generation", []*workv1alpha1.Work{work("flotilla-es-m1", 2, applied(metav1.ConditionTrue, 2))}, map[string]map[string]int{}},
		{"no verdict yet", []*workv1alpha1.Work{work("flotilla-es-m1", 1, nil)}, map[string]map[string]int{"m1": {"pending": 1}}},
		{"applied at an older generation", []*workv1alpha1.Work{work("flotilla-es-m1", 3, applied(metav1.ConditionTrue, 2))}, map[string]map[string]int{"m1": {"pending": 1}}},
		{"failed", []*workv1alpha1.Work{
			work("flotilla-es-m1", 1, applied(metav1.ConditionFalse, 1)),
			work("flotilla-es-m2", 1, applied(metav1.ConditionFalse, 1)),
			work("flotilla-es-m2", 1, nil),
		}, map[string]map[string]int{"m1": {"failed": 1}, "m2": {"failed": 1, "pending": 1}}},
		{"not a cluster namespace, or being deleted", []*workv1alpha1.Work{work("default", 1, nil), deleting}, map[string]map[string]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := worksNotApplied(tc.works); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("worksNotApplied = %v, want %v", got, tc.want)
			}
		})
	}
}
