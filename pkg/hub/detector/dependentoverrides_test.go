package detector

import (
	"reflect"
	"strings"
	"testing"

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
