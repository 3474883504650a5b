package statuslimits

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

func TestWorkloadStatus(t *testing.T) {
	small := &runtime.RawExtension{Raw: []byte(`{"replicas":3}`)}
	if got, note := WorkloadStatus(small); got != small || note != "" {
		t.Errorf("a small aggregate: %v, %q", got, note)
	}
	if got, note := WorkloadStatus(nil); got != nil || note != "" {
		t.Errorf("none: %v, %q", got, note)
	}
	big := &runtime.RawExtension{Raw: []byte(`{"x":"` + strings.Repeat("x", MaxWorkloadStatus) + `"}`)}
	got, note := WorkloadStatus(big)
	if got == nil || len(got.Raw) > MaxWorkloadStatus || !strings.Contains(note, "over the limit of 131072 bytes") {
		t.Fatalf("a large aggregate: %d bytes, %q", len(got.Raw), note)
	}
	var m map[string]any
	if err := json.Unmarshal(got.Raw, &m); err != nil || LeftOutNote(m) != note {
		t.Errorf("stand-in %s does not carry %q", got.Raw, note)
	}
}

func TestLeftOutNote(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]any
		want string
	}{
		{map[string]any{LeftOutField: "too big"}, "too big"},
		{map[string]any{LeftOutField: "too big", "replicas": 3.0}, ""},
		{map[string]any{LeftOutField: 3.0}, ""},
		{map[string]any{"replicas": 3.0}, ""},
		{nil, ""},
	} {
		if got := LeftOutNote(tc.in); got != tc.want {
			t.Errorf("LeftOutNote(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
