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

package rolloutanalysis

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

func TestValidate(t *testing.T) {
	good := spec(testQuery, "result < 0.05", "result >= 0.05", 30*time.Second, 3, 1)
	if err := Validate(good); err != nil {
		t.Fatalf("good spec: %v", err)
	}
	minimal := policyv1alpha1.RolloutAnalysis{Prometheus: policyv1alpha1.PrometheusAnalysis{Query: "vector(1)"}, SuccessCondition: "result == 1.0 && result < 2"}
	if err := Validate(minimal); err != nil {
		t.Fatalf("minimal spec: %v", err)
	}
	long := "result < 0.05" + strings.Repeat(" ", MaxConditionLength)
	nested := "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, result < 1.0)))))"
	for _, tc := range []struct {
		name   string
		mutate func(*policyv1alpha1.RolloutAnalysis)
		want   string
	}{
		{"bad CEL", func(s *policyv1alpha1.RolloutAnalysis) { s.SuccessCondition = "result <" }, "successCondition: compilation failed"},
		{"unknown variable", func(s *policyv1alpha1.RolloutAnalysis) { s.SuccessCondition = "value < 1.0" }, "undeclared reference to 'value'"},
		{"not bool", func(s *policyv1alpha1.RolloutAnalysis) { s.SuccessCondition = "result + 1.0" }, "successCondition: must evaluate to bool, not double"},
		{"dyn", func(s *policyv1alpha1.RolloutAnalysis) { s.SuccessCondition = "dyn(result < 1.0)" }, "must evaluate to bool, not dyn"},
		{"int literal", func(s *policyv1alpha1.RolloutAnalysis) { s.SuccessCondition = "result == 0" }, "compare it with 0.0"},
		{"bad failure CEL", func(s *policyv1alpha1.RolloutAnalysis) { s.FailureCondition = "result >= 'x'" }, "failureCondition: compilation failed"},
		{"failure not bool", func(s *policyv1alpha1.RolloutAnalysis) { s.FailureCondition = "string(result)" }, "failureCondition: must evaluate to bool, not string"},
		{"too long", func(s *policyv1alpha1.RolloutAnalysis) { s.SuccessCondition = long }, "successCondition: 1037 characters, at most 1024"},
		{"failure too long", func(s *policyv1alpha1.RolloutAnalysis) { s.FailureCondition = long }, "failureCondition: 1037 characters, at most 1024"},
		{"too costly", func(s *policyv1alpha1.RolloutAnalysis) { s.SuccessCondition = nested }, "exceeds the limit"},
		{"too deep", func(s *policyv1alpha1.RolloutAnalysis) {
			s.SuccessCondition = strings.Repeat("(", 100) + "result < 1.0" + strings.Repeat(")", 100)
		}, "successCondition: compilation failed"},
		{"empty success", func(s *policyv1alpha1.RolloutAnalysis) { s.SuccessCondition = " " }, "successCondition: must not be empty"},
		{"empty query", func(s *policyv1alpha1.RolloutAnalysis) { s.Prometheus.Query = "" }, "prometheus.query: must not be empty"},
		{"query too long", func(s *policyv1alpha1.RolloutAnalysis) { s.Prometheus.Query = strings.Repeat("1+", 2100) + "1" }, "at most 4096"},
		{"unknown placeholder", func(s *policyv1alpha1.RolloutAnalysis) { s.Prometheus.Query = `up{cluster=~"{{cluster}}"}` }, `unknown placeholder "{{cluster}}"`},
		{"placeholder outside a string", func(s *policyv1alpha1.RolloutAnalysis) { s.Prometheus.Query = `up{cluster=~{{clusters}}}` }, "outside a string literal"},
		{"unterminated string", func(s *policyv1alpha1.RolloutAnalysis) { s.Prometheus.Query = `up{cluster=~"{{clusters}}}` }, "unterminated string"},
		{"interval", func(s *policyv1alpha1.RolloutAnalysis) {
			s.Interval = &metav1.Duration{Duration: 500 * time.Millisecond}
		}, "interval: 500ms, at least 1s"},
		{"count", func(s *policyv1alpha1.RolloutAnalysis) { s.Count = ptr(int32(0)) }, "count: 0"},
		{"failureLimit", func(s *policyv1alpha1.RolloutAnalysis) { s.FailureLimit = ptr(int32(-1)) }, "failureLimit: -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.mutate(&s)
			err := Validate(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
			if len(err.Error()) > 1024 {
				t.Fatalf("message of %d bytes", len(err.Error()))
			}
		})
	}
	// Several problems at once: one bounded message.
	bad := spec(`up{x="{{nope}}"}`, long, long, time.Millisecond, 0, -1)
	err := Validate(bad)
	if err == nil || len(err.Error()) > 1024 || !strings.Contains(err.Error(), "prometheus.query") || !strings.Contains(err.Error(), "successCondition") {
		t.Fatalf("Validate: %v", err)
	}
}
