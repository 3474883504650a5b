package workobjects

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// A policy name of up to 253 characters becomes a valid label value; one
// that fits stays as it is; two long names with the same first 52
// characters stay apart.
func TestPolicyLabelValue(t *testing.T) {
	short := "nginx-propagation"
	if got := PolicyLabelValue(short); got != short {
		t.Errorf("PolicyLabelValue(%q) = %q, want it unchanged", short, got)
	}
	exact := strings.Repeat("a", 63)
	if got := PolicyLabelValue(exact); got != exact {
		t.Errorf("a 63-character name changed to %q", got)
	}
	prefix := "deploy-longname-longname-longname-longname-longname-l" // 53 characters
	seen := map[string]string{}
	for _, name := range []string{prefix + "ongname-abcde", prefix + "ongname-fghij", strings.Repeat("b", 51) + ".c" + strings.Repeat("d", 200)} {
		got := PolicyLabelValue(name)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("PolicyLabelValue(%q) = %q, not a label value: %v", name, got, errs)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("%q and %q both became %q", name, other, got)
		}
		seen[got] = name
	}
}
