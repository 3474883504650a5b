package detector

import (
	"errors"
	"testing"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

func TestResolveSchedulePriority(t *testing.T) {
	classes := map[string]int32{"high": 1000, "low": -5, "system-node-critical": 2000001000, "max": 1000000000}
	get := func(name string) (*schedulingv1.PriorityClass, error) {
		v, ok := classes[name]
		if !ok {
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: "scheduling.k8s.io", Resource: "priorityclasses"}, name)
		}
		return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v}, nil
	}
	kube := func(name string) *policyv1alpha1.SchedulePriority {
		return &policyv1alpha1.SchedulePriority{PriorityClassSource: policyv1alpha1.KubePriorityClass, PriorityClassName: name}
	}
	for _, tc := range []struct {
		name    string
		sp      *policyv1alpha1.SchedulePriority
		get     func(string) (*schedulingv1.PriorityClass, error)
		want    int32
		none    bool // no schedulePriority on the binding
		missing bool // a *priorityClassError
	}{
		{name: "none", sp: nil, get: get, none: true},
		{name: "class value", sp: kube("high"), get: get, want: 1000},
		{name: "negative", sp: kube("low"), get: get, want: -5},
		{name: "system class bounded", sp: kube("system-node-critical"), get: get, want: policyv1alpha1.MaxSchedulePriority},
		{name: "highest user class", sp: kube("max"), get: get, want: 1000000000},
		{name: "missing class", sp: kube("nope"), get: get, missing: true},
		{name: "PodPriorityClass", sp: &policyv1alpha1.SchedulePriority{PriorityClassSource: policyv1alpha1.PodPriorityClass, PriorityClassName: "high"}, get: get, missing: true},
		{name: "no lister", sp: kube("high"), get: nil, missing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveSchedulePriority(tc.sp, tc.get)
			var pce *priorityClassError
			switch {
			case tc.missing:
				if !errors.As(err, &pce) || got != nil {
					t.Fatalf("got %+v, %v; want a priorityClassError", got, err)
				}
			case err != nil:
				t.Fatal(err)
			case tc.none:
				if got != nil {
					t.Fatalf("got %+v, want none", got)
				}
			case got == nil || got.Priority != tc.want:
				t.Fatalf("got %+v, want priority %d", got, tc.want)
			}
		})
	}
	// Another error of the lister is returned as it is (retried), not
	// said as a missing class.
	boom := errors.New("boom")
	if _, err := ResolveSchedulePriority(kube("high"), func(string) (*schedulingv1.PriorityClass, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
}
