package detector

import (
	"reflect"
	"strings"
	"testing"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

func TestMissingNames(t *testing.T) {
	have := map[string]bool{"a": true, "c": true}
	exists := func(n string) bool { return have[n] }
	tests := []struct {
		names []string
		want  []string
	}{
		{nil, nil},
		{[]string{"a", "c"}, nil},
		{[]string{"d", "b", "a", "b"}, []string{"b", "d"}},
	}
	for _, tt := range tests {
		if got := MissingNames(tt.names, exists); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("MissingNames(%v) = %v, want %v", tt.names, got, tt.want)
		}
	}
}

func TestDependentOverridesMessage(t *testing.T) {
	pp := map[string]string{workobjects.LabelPropagationPolicyNamespace: "shop", workobjects.LabelPropagationPolicyName: "web"}
	if got := dependentOverridesMessage(pp, []string{"a", "b"}); !strings.Contains(got, "OverridePolicies a, b in namespace shop") ||
		!strings.Contains(got, "PropagationPolicy shop/web") {
		t.Errorf("message = %q", got)
	}
	cpp := map[string]string{workobjects.LabelClusterPropagationPolicyName: "all"}
	if got := dependentOverridesMessage(cpp, []string{"x"}); !strings.Contains(got, "ClusterOverridePolicy x not found") ||
		strings.Contains(got, "namespace") {
		t.Errorf("message = %q", got)
	}
}

func TestExistingBindingNote(t *testing.T) {
	dep := &workv1alpha1.ResourceBinding{}
	dep.Name = "settings-configmap"
	dep.Spec.RequiredBy = []workv1alpha1.BindingSnapshot{{Namespace: "a", Name: "web-deployment"}}
	if got := existingBindingNote(dep); !strings.Contains(got, "dependency of web-deployment") {
		t.Errorf("dependency-only binding: %q", got)
	}
	dep.Spec.Placement = &policyv1alpha1.Placement{}
	if got := existingBindingNote(dep); got != "; the existing placement is kept" {
		t.Errorf("binding with a placement: %q", got)
	}
}
