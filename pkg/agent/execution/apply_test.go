package execution

import "testing"

func TestIsSubset(t *testing.T) {
	live := map[string]any{
		"metadata": map[string]any{"name": "web", "uid": "u", "labels": map[string]any{"app": "web", "extra": "x"}},
		"spec": map[string]any{"replicas": int64(3), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "c", "image": "nginx", "imagePullPolicy": "IfNotPresent"}}}}},
	}
	cases := []struct {
		name    string
		desired map[string]any
		want    bool
	}{
		{"fields the apiserver added are ignored", map[string]any{
			"metadata": map[string]any{"name": "web", "labels": map[string]any{"app": "web"}},
			"spec": map[string]any{"replicas": float64(3), "template": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"name": "c", "image": "nginx"}}}}}}, true},
		{"an edited field is drift", map[string]any{"spec": map[string]any{"replicas": int64(1)}}, false},
		{"a missing field is drift", map[string]any{"spec": map[string]any{"paused": true}}, false},
		{"a list of another length is drift", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "c"}, map[string]any{"name": "d"}}}}}}, false},
		{"a changed list element is drift", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "c", "image": "httpd"}}}}}}, false},
		{"a null field matches an absent one", map[string]any{"spec": map[string]any{"strategy": nil}}, true},
		{"a type change is drift", map[string]any{"spec": map[string]any{"replicas": "3"}}, false},
	}
	for _, tc := range cases {
		if got := isSubset(tc.desired, live); got != tc.want {
			t.Errorf("%s: isSubset = %v, want %v", tc.name, got, tc.want)
		}
	}
}
