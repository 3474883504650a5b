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
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	testingclock "k8s.io/utils/clock/testing"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// bodyTransport answers every request with status and body.
type bodyTransport struct {
	status int
	body   string
}

func (b bodyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: b.status,
		Header:     http.Header{"Content-Type": []string{"application/json"}},
		Body:       io.NopCloser(strings.NewReader(b.body)),
		Request:    req,
	}, nil
}

// FuzzMeasure runs measurements of a Prometheus answering body with
// conditions success and failure: never a panic, a phase of the four,
// counts that add up, a bounded valid message.
func FuzzMeasure(f *testing.F) {
	f.Add(200, vectorBody(sample(`"cluster":"a"`, "0.01")), "result < 0.05", "result >= 0.05")
	f.Add(200, vectorBody(sample(`"cluster":"b"`, "0.9"), sample(`"cluster":"a"`, "0.01")), "result < 0.05", "")
	f.Add(200, vectorBody(), "true", "false")
	f.Add(200, scalarBody("NaN"), "result != result", "")
	f.Add(200, scalarBody("1e308"), "int(result) > 0", "result > 0.0")
	f.Add(200, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]]}]}}`, "true", "")
	f.Add(200, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"histogram":[1,{"count":"1","sum":"1","buckets":[[0,"0","1","1"]]}]}]}}`, "true", "")
	f.Add(400, `{"status":"error","errorType":"bad_data","error":"parse error"}`, "result < 1.0", "")
	f.Add(500, strings.Repeat("é", 3000), "result < 1.0", "")
	f.Add(200, `{"status":"success","data":{"resultType":"vector","result":[null]}}`, "true", "")
	f.Add(200, "\xff\xfe", "result <", "result >")
	f.Fuzz(func(t *testing.T, status int, body, success, failure string) {
		if status < 100 || status > 999 {
			status = 200
		}
		if len(success) > 2*MaxConditionLength || len(failure) > 2*MaxConditionLength {
			return
		}
		fc := testingclock.NewFakeClock(time.Unix(1700000000, 0))
		r := NewRunner(Options{
			Address:   "http://prometheus.invalid:9090",
			Clock:     fc,
			Timeout:   time.Second,
			transport: bodyTransport{status: status, body: body},
		})
		s := spec(testQuery, success, failure, time.Second, 2, 1)
		clusters := []string{"a", "b.c"}
		ctx := context.Background()
		var st workv1alpha1.AnalysisStatus
		for range 4 {
			due, _, _ := r.takeDue()
			for _, a := range due {
				r.measureAndApply(ctx, a)
			}
			st = r.Observe("k", s, "g", clusters)
			fc.Step(time.Second)
		}
		switch st.Phase {
		case workv1alpha1.AnalysisRunning, workv1alpha1.AnalysisSuccessful, workv1alpha1.AnalysisFailed, workv1alpha1.AnalysisInconclusive:
		default:
			t.Fatalf("phase %q", st.Phase)
		}
		if len(st.Message) > MaxMessageBytes || !utf8.ValidString(st.Message) {
			t.Fatalf("message of %d bytes, valid UTF-8 %v", len(st.Message), utf8.ValidString(st.Message))
		}
		if st.Successes < 0 || st.Failures < 0 || st.Inconclusive < 0 || st.Successes+st.Failures+st.Inconclusive > 4 {
			t.Fatalf("counts %+v", st)
		}
		switch {
		case st.Successes >= 2 && st.Phase != workv1alpha1.AnalysisSuccessful,
			st.Failures > 1 && st.Phase != workv1alpha1.AnalysisFailed,
			st.Inconclusive > 0 && st.Phase != workv1alpha1.AnalysisInconclusive,
			st.Phase == workv1alpha1.AnalysisRunning && st.Successes+st.Failures+st.Inconclusive != 0 && st.Successes+st.Failures != 3 && st.Successes+st.Failures > 2:
			t.Fatalf("phase %s does not follow from the counts %+v", st.Phase, st)
		}
		if st.Phase == workv1alpha1.AnalysisSuccessful && (status/100 != 2 || Validate(s) != nil) {
			t.Fatalf("success from status %d or an invalid spec (%v): %+v", status, Validate(s), st)
		}
	})
}
