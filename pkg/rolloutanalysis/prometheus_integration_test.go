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
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// TestPrometheusIntegration runs analyses against the real Prometheus
// scraping this test's own /metrics.
func TestPrometheusIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Prometheus")
	}
	reg := prometheus.NewRegistry()
	errorRatio := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "app_error_ratio",
		Help: "The fraction of the application's requests that fail, per cluster.",
	}, []string{"cluster"})
	reg.MustRegister(errorRatio)
	// Healthy canary clusters, one with dots in its name; a cluster whose
	// name the unescaped regular expression would also match is bad.
	errorRatio.WithLabelValues("eu-1.prod").Set(0.01)
	errorRatio.WithLabelValues("us-1").Set(0.02)
	errorRatio.WithLabelValues("eu-1xprod").Set(0.9)
	errorRatio.WithLabelValues("bad.one").Set(0.4)
	app := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(app.Close)

	address := testenv.StartPrometheus(t, strings.TrimPrefix(app.URL, "http://"))

	// Wait for the first scrape of every series, so that no analysis
	// starts on a Prometheus that has nothing yet.
	client, err := promapi.NewClient(promapi.Config{Address: address})
	if err != nil {
		t.Fatal(err)
	}
	api := promv1.NewAPI(client)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v, _, err := api.Query(ctx, `count(app_error_ratio)`, time.Time{})
		cancel()
		if vec, ok := v.(model.Vector); err == nil && ok && len(vec) == 1 && vec[0].Value == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus has not scraped app_error_ratio after 60s: %v %v", v, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	var mu sync.Mutex
	changes := map[string]int{}
	r := NewRunner(Options{
		Address: address,
		Timeout: 10 * time.Second,
		OnChange: func(key string) {
			mu.Lock()
			changes[key]++
			mu.Unlock()
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	const query = `max(app_error_ratio{cluster=~"{{clusters}}"})`
	cases := []struct {
		key      string
		query    string
		clusters []string
		want     workv1alpha1.AnalysisPhase
		message  string
		count    int32
	}{
		{key: "low", query: query, clusters: []string{"eu-1.prod", "us-1"}, want: workv1alpha1.AnalysisSuccessful, message: "result 0.02", count: 2},
		{key: "high", query: query, clusters: []string{"bad.one"}, want: workv1alpha1.AnalysisFailed, message: "result 0.4"},
		{key: "missing", query: `max(app_missing_ratio{cluster=~"{{clusters}}"})`, clusters: []string{"eu-1.prod"}, want: workv1alpha1.AnalysisInconclusive, message: "empty vector"},
		{key: "no such cluster", query: query, clusters: []string{"eu-2.prod"}, want: workv1alpha1.AnalysisInconclusive, message: "empty vector"},
		{key: "bad query", query: `max(app_error_ratio{cluster=~"{{clusters}}"}`, clusters: []string{"us-1"}, want: workv1alpha1.AnalysisInconclusive, message: "bad_data"},
	}
	for _, tc := range cases {
		count := max(tc.count, 1)
		s := spec(tc.query, "result < 0.05", "result >= 0.05", time.Second, count, 0)
		deadline := time.Now().Add(60 * time.Second)
		var st workv1alpha1.AnalysisStatus
		for {
			st = r.Observe(tc.key, s, "canary", tc.clusters)
			if st.Phase != workv1alpha1.AnalysisRunning {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still Running after 60s: %+v", tc.key, st)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("%s: %+v", tc.key, st)
		if st.Phase != tc.want || !strings.Contains(st.Message, tc.message) {
			t.Errorf("%s: %+v, want phase %s and a message with %q", tc.key, st, tc.want, tc.message)
		}
		if tc.want == workv1alpha1.AnalysisSuccessful && st.Successes != count {
			t.Errorf("%s: %d successes, want %d", tc.key, st.Successes, count)
		}
		mu.Lock()
		n := changes[tc.key]
		mu.Unlock()
		if n == 0 {
			t.Errorf("%s: OnChange never called", tc.key)
		}
	}
}
