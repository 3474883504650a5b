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
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// fakeProm speaks enough of the Prometheus HTTP API: /api/v1/query.
type fakeProm struct {
	*httptest.Server
	mu       sync.Mutex
	queries  []string
	inFlight int
	maxIn    int
	respond  func(w http.ResponseWriter, r *http.Request, query string)
}

func newFakeProm(t *testing.T, respond func(w http.ResponseWriter, r *http.Request, query string)) *fakeProm {
	t.Helper()
	p := &fakeProm{respond: respond}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		q := r.FormValue("query")
		p.mu.Lock()
		p.queries = append(p.queries, q)
		p.inFlight++
		p.maxIn = max(p.maxIn, p.inFlight)
		respond := p.respond
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			p.inFlight--
			p.mu.Unlock()
		}()
		respond(w, r, q)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *fakeProm) Queries() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.queries...)
}

func (p *fakeProm) setRespond(f func(w http.ResponseWriter, r *http.Request, query string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.respond = f
}

// reply answers with a fixed status and body.
func reply(status int, body string) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, _ *http.Request, _ string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

func vectorBody(samples ...string) string {
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(samples, ",") + `]}}`
}

func sample(labels, value string) string {
	return `{"metric":{` + labels + `},"value":[1700000000.5,"` + value + `"]}`
}

func scalarBody(value string) string {
	return `{"status":"success","data":{"resultType":"scalar","result":[1700000000.5,"` + value + `"]}}`
}

type harness struct {
	r       *Runner
	clock   *testingclock.FakeClock
	mu      sync.Mutex
	changes map[string]int
}

func (h *harness) changed(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changes[key]
}

// start runs a Runner against address until the test ends.
func start(t *testing.T, address string, mutate ...func(*Options)) *harness {
	t.Helper()
	h := &harness{clock: testingclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)), changes: map[string]int{}}
	opts := Options{
		Address: address,
		Clock:   h.clock,
		Timeout: 5 * time.Second,
		OnChange: func(key string) {
			h.mu.Lock()
			h.changes[key]++
			h.mu.Unlock()
		},
	}
	for _, m := range mutate {
		m(&opts)
	}
	h.r = NewRunner(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context was cancelled")
		}
	})
	return h
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// observeUntil polls Observe until pred holds and returns the status.
func (h *harness) observeUntil(t *testing.T, key string, spec policyv1alpha1.RolloutAnalysis, group string, clusters []string, what string, pred func(workv1alpha1.AnalysisStatus) bool) workv1alpha1.AnalysisStatus {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st := h.r.Observe(key, spec, group, clusters)
		if pred(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: status %+v", what, st)
		}
		time.Sleep(time.Millisecond)
	}
}

// idle waits until no query is in flight.
func (h *harness) idle(t *testing.T) {
	t.Helper()
	waitFor(t, "no measurement in flight", func() bool {
		h.r.mu.Lock()
		defer h.r.mu.Unlock()
		return h.r.inflight == 0
	})
}

// assertQuiet shows that key's analysis, terminal, measures no more: after
// a long step of the clock, a sentinel analysis is measured (the loop has
// looked at every analysis since the step) and key's queries did not grow.
func (h *harness) assertQuiet(t *testing.T, p *fakeProm, spec policyv1alpha1.RolloutAnalysis) {
	t.Helper()
	before := len(p.Queries())
	h.clock.Step(time.Hour)
	sentinel := "sentinel/" + t.Name()
	h.observeUntil(t, sentinel, spec, "g", []string{"sentinel"}, "the sentinel's measurement", func(st workv1alpha1.AnalysisStatus) bool {
		return st.Successes+st.Failures+st.Inconclusive > 0
	})
	h.idle(t)
	if got := len(p.Queries()); got != before+1 {
		t.Fatalf("a terminal analysis measured again: %d queries, want %d", got, before+1)
	}
	h.r.Forget(sentinel)
}

func ptr[T any](v T) *T { return &v }

func spec(query, success, failure string, interval time.Duration, count, failureLimit int32) policyv1alpha1.RolloutAnalysis {
	return policyv1alpha1.RolloutAnalysis{
		Prometheus:       policyv1alpha1.PrometheusAnalysis{Query: query},
		SuccessCondition: success,
		FailureCondition: failure,
		Interval:         &metav1.Duration{Duration: interval},
		Count:            ptr(count),
		FailureLimit:     ptr(failureLimit),
	}
}

const testQuery = `max(app_error_ratio{cluster=~"{{clusters}}"})`

func TestSuccessAfterCount(t *testing.T) {
	p := newFakeProm(t, reply(200, vectorBody(sample(`"cluster":"a"`, "0.01"))))
	reg := prometheus.NewRegistry()
	h := start(t, p.URL, func(o *Options) { o.Registerer = reg })
	s := spec(testQuery, "result < 0.05", "result >= 0.05", 10*time.Second, 3, 0)
	key, clusters := "ns/b@rev1/canary", []string{"a"}

	st := h.r.Observe(key, s, "canary", clusters)
	if st.Phase != workv1alpha1.AnalysisRunning || st.Group != "canary" || st.Successes != 0 {
		t.Fatalf("first Observe: %+v", st)
	}
	for i := int32(1); i <= 3; i++ {
		if i > 1 {
			h.clock.Step(10 * time.Second)
		}
		st = h.observeUntil(t, key, s, "canary", clusters, fmt.Sprintf("success %d", i), func(st workv1alpha1.AnalysisStatus) bool { return st.Successes == i })
		if got := len(p.Queries()); got != int(i) {
			t.Fatalf("after %d successes: %d queries", i, got)
		}
		want := workv1alpha1.AnalysisRunning
		if i == 3 {
			want = workv1alpha1.AnalysisSuccessful
		}
		if st.Phase != want {
			t.Fatalf("after %d successes: phase %s, want %s (%+v)", i, st.Phase, want, st)
		}
		if !strings.Contains(st.Message, "result 0.01") || !strings.Contains(st.Message, fmt.Sprintf("%d of 3 successes", i)) {
			t.Fatalf("message %q", st.Message)
		}
		if i < 3 {
			// Not due before the interval has passed.
			h.idle(t)
			h.clock.Step(9 * time.Second)
			h.idle(t)
			if got := len(p.Queries()); got != int(i) {
				t.Fatalf("measured before the interval: %d queries", got)
			}
			h.clock.Step(-9 * time.Second)
		}
	}
	if h.changed(key) != 3 {
		t.Errorf("OnChange(%s) called %d times, want 3", key, h.changed(key))
	}
	if got := testutil.ToFloat64(h.r.counter.WithLabelValues("success")); got != 3 {
		t.Errorf("success measurements %v, want 3", got)
	}
	if n, err := testutil.GatherAndCount(reg, "flotilla_rollout_analysis_measurements_total"); err != nil || n != 3 {
		t.Errorf("gathered %d series (%v), want 3", n, err)
	}
	h.assertQuiet(t, p, s)
	if st2 := h.r.Observe(key, s, "canary", clusters); st2 != st {
		t.Errorf("Observe after the end: %+v, want %+v", st2, st)
	}
}

func TestFailureOverLimit(t *testing.T) {
	p := newFakeProm(t, reply(200, scalarBody("0.5")))
	h := start(t, p.URL)
	s := spec(testQuery, "result < 0.05", "result >= 0.05", 5*time.Second, 2, 1)
	key, clusters := "k", []string{"a"}
	st := h.observeUntil(t, key, s, "g", clusters, "the first failure", func(st workv1alpha1.AnalysisStatus) bool { return st.Failures == 1 })
	if st.Phase != workv1alpha1.AnalysisRunning {
		t.Fatalf("one failure of 1 tolerated: %+v", st)
	}
	h.clock.Step(5 * time.Second)
	st = h.observeUntil(t, key, s, "g", clusters, "the second failure", func(st workv1alpha1.AnalysisStatus) bool { return st.Failures == 2 })
	if st.Phase != workv1alpha1.AnalysisFailed || st.Successes != 0 || st.Inconclusive != 0 {
		t.Fatalf("two failures, 1 tolerated: %+v", st)
	}
	if !strings.Contains(st.Message, "result 0.5") || !strings.Contains(st.Message, "failureCondition holds") {
		t.Fatalf("message %q", st.Message)
	}
	h.assertQuiet(t, p, s)
}

func TestInconclusive(t *testing.T) {
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()

	huge := vectorBody(sample(`"cluster":"a","pad":"`+strings.Repeat("x", MaxResponseBytes)+`"`, "0.01"))
	cases := []struct {
		name, success, failure string
		respond                func(http.ResponseWriter, *http.Request, string)
		address                string // instead of the fake's
		want                   string
	}{
		{name: "empty vector", respond: reply(200, vectorBody()), want: "empty vector"},
		{name: "NaN scalar", respond: reply(200, scalarBody("NaN")), want: "result NaN"},
		{name: "NaN sample", respond: reply(200, vectorBody(sample(`"cluster":"a"`, "NaN"))), want: "result NaN"},
		{name: "+Inf", respond: reply(200, scalarBody("+Inf")), want: "result +Inf"},
		{name: "-Inf", respond: reply(200, vectorBody(sample(``, "-Inf"))), want: "result -Inf"},
		{name: "HTTP 500", respond: reply(500, "boom"), want: "server error: 500 (boom)"},
		{name: "HTTP 503 API error", respond: reply(503, `{"status":"error","errorType":"unavailable","error":"storage on fire"}`), want: "storage on fire"},
		{name: "query error", respond: reply(400, `{"status":"error","errorType":"bad_data","error":"parse error: unexpected }"}`), want: "parse error"},
		{name: "not JSON", respond: reply(200, "<html>"), want: "the Prometheus query failed"},
		{name: "matrix", respond: reply(200, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]]}]}}`), want: "range vector"},
		{name: "string", respond: reply(200, `{"status":"success","data":{"resultType":"string","result":[1,"hi"]}}`), want: "the Prometheus query failed"},
		{name: "too large", respond: reply(200, huge), want: "larger than 1048576 bytes"},
		{name: "timeout", respond: func(_ http.ResponseWriter, r *http.Request, _ string) { <-r.Context().Done() }, want: "timed out after 200ms"},
		{name: "unreachable", address: closed, want: "connection refused"},
		{name: "no address", address: "", want: NoAddressMessage},
		{name: "invalid address", address: "127.0.0.1:9090", want: "invalid Prometheus address"},
		{name: "success false, no failureCondition", failure: "-", respond: reply(200, scalarBody("0.9")), want: "successCondition does not hold (no failureCondition)"},
		{name: "neither", success: "result < 0.05", failure: "result > 0.5", respond: reply(200, scalarBody("0.1")), want: "neither successCondition nor failureCondition holds"},
		{name: "evaluation error", success: "int(result * 1e300) > 0", respond: reply(200, scalarBody("1e300")), want: "evaluation failed"},
		{name: "bad condition", success: "result <", respond: reply(200, scalarBody("0")), want: "successCondition: compilation failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakeProm(t, reply(200, scalarBody("0")))
			if tc.respond != nil {
				p.setRespond(tc.respond)
			}
			addr := p.URL
			if tc.respond == nil {
				addr = tc.address
			}
			h := start(t, addr, func(o *Options) { o.Timeout = 200 * time.Millisecond })
			success, failure := "result < 0.05", "result >= 0.05"
			if tc.success != "" {
				success = tc.success
			}
			if tc.failure == "-" {
				failure = ""
			} else if tc.failure != "" {
				failure = tc.failure
			}
			s := spec(testQuery, success, failure, time.Second, 1, 0)
			st := h.observeUntil(t, "k", s, "g", []string{"a"}, "the end", func(st workv1alpha1.AnalysisStatus) bool {
				return st.Phase != workv1alpha1.AnalysisRunning
			})
			if st.Phase != workv1alpha1.AnalysisInconclusive || st.Inconclusive != 1 || st.Successes != 0 || st.Failures != 0 {
				t.Fatalf("status %+v, want Inconclusive after one measurement", st)
			}
			if !strings.Contains(st.Message, tc.want) {
				t.Fatalf("message %q, want it to contain %q", st.Message, tc.want)
			}
			if len(st.Message) > MaxMessageBytes || !utf8.ValidString(st.Message) {
				t.Fatalf("message of %d bytes", len(st.Message))
			}
			if tc.respond != nil {
				h.assertQuiet(t, p, spec(testQuery, "true", "", time.Second, 1, 0))
			}
		})
	}
}

func TestClustersSubstitution(t *testing.T) {
	p := newFakeProm(t, reply(200, scalarBody("0")))
	h := start(t, p.URL)
	tmpl := "sum(a{cluster=~\"{{clusters}}\"}) / sum(b{c='{{clusters}}', d=~`{{clusters}}`}) # {{clusters}}"
	s := spec(tmpl, "result < 1", "", time.Second, 1, 0)
	clusters := []string{"eu-1.prod.example.com", "a.b", "eu-1.prod.example.com", "x"}
	h.observeUntil(t, "k", s, "g", clusters, "a measurement", func(st workv1alpha1.AnalysisStatus) bool {
		return st.Phase == workv1alpha1.AnalysisSuccessful
	})
	qs := p.Queries()
	if len(qs) != 1 {
		t.Fatalf("queries %q", qs)
	}
	want := `sum(a{cluster=~"(?:a\\.b|eu-1\\.prod\\.example\\.com|x)"}) / sum(b{c='(?:a\\.b|eu-1\\.prod\\.example\\.com|x)', d=~` +
		"`(?:a\\.b|eu-1\\.prod\\.example\\.com|x)`}) # (?:a\\.b|eu-1\\.prod\\.example\\.com|x)"
	if qs[0] != want {
		t.Fatalf("query\n%s\nwant\n%s", qs[0], want)
	}
	// What Prometheus reads in the "..." string, anchored as it anchors
	// label matchers, matches exactly the names.
	lit := regexp.MustCompile(`cluster=~("[^"]*")`).FindStringSubmatch(qs[0])[1]
	re, err := strconv.Unquote(lit)
	if err != nil {
		t.Fatal(err)
	}
	anchored := regexp.MustCompile("^(?:" + re + ")$")
	for _, name := range []string{"a.b", "x", "eu-1.prod.example.com"} {
		if !anchored.MatchString(name) {
			t.Errorf("%s does not match %s", re, name)
		}
	}
	for _, name := range []string{"aXb", "a.bx", "xx", "eu-1Xprod.example.com", "", "a.b|x"} {
		if anchored.MatchString(name) {
			t.Errorf("%s matches %q", re, name)
		}
	}
}

func TestBuildQuery(t *testing.T) {
	for _, tc := range []struct{ tmpl, want, err string }{
		{tmpl: `up`, want: `up`},
		{tmpl: `up{cluster=~"{{clusters}}"}`, want: `up{cluster=~"(?:a\\.b|c)"}`},
		{tmpl: `up{cluster=~"x-{{clusters}}-\"{{clusters}}"}`, want: `up{cluster=~"x-(?:a\\.b|c)-\"(?:a\\.b|c)"}`},
		{tmpl: "up{cluster=~`{{clusters}}`}", want: "up{cluster=~`(?:a\\.b|c)`}"},
		{tmpl: `up{cluster=~"{{cluster}}"}`, err: `unknown placeholder "{{cluster}}"`},
		{tmpl: `up{cluster=~"{{ clusters }}"}`, err: `unknown placeholder "{{ clusters }}"`},
		{tmpl: `up{cluster=~"{{clusters}}}`, err: "unterminated string at offset 12"},
	} {
		got, err := buildQuery(tc.tmpl, []string{"a.b", "c"})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.tmpl, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.tmpl, got, err, tc.want)
		}
	}
	// A name that would close the string is escaped.
	got, err := buildQuery(`up{cluster=~"{{clusters}}"}`, []string{`a"b`, "c\\d"})
	if err != nil || got != `up{cluster=~"(?:a\"b|c\\\\d)"}` {
		t.Errorf("quote and backslash: %s, %v", got, err)
	}
	if _, err := buildQuery("up{cluster=~`{{clusters}}`}", []string{"a`b"}); err == nil {
		t.Error("a backquote in a raw string was accepted")
	}
	many := make([]string, 2000)
	for i := range many {
		many[i] = strings.Repeat("n", 200) + strconv.Itoa(i)
	}
	if _, err := buildQuery(`up{cluster=~"{{clusters}}"}`, many); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("a query over MaxQueryBytes: %v", err)
	}
}

func TestRestartOnChange(t *testing.T) {
	p := newFakeProm(t, reply(200, scalarBody("0.01")))
	h := start(t, p.URL)
	s := spec(testQuery, "result < 0.05", "", 10*time.Second, 2, 0)
	st := h.observeUntil(t, "k", s, "g", []string{"a", "b"}, "a success", func(st workv1alpha1.AnalysisStatus) bool { return st.Successes == 1 })
	// The same clusters in another order, with a duplicate, and the spec
	// with its defaults spelled out differently are no change.
	same := s
	same.Interval = &metav1.Duration{Duration: 10 * time.Second}
	if st2 := h.r.Observe("k", same, "g", []string{"b", "a", "b"}); st2 != st {
		t.Fatalf("same analysis restarted: %+v", st2)
	}
	// Other clusters restart it.
	st = h.r.Observe("k", s, "g", []string{"a", "c"})
	if st.Successes != 0 || st.Phase != workv1alpha1.AnalysisRunning {
		t.Fatalf("restart: %+v", st)
	}
	st = h.observeUntil(t, "k", s, "g", []string{"a", "c"}, "a success after the restart", func(st workv1alpha1.AnalysisStatus) bool { return st.Successes == 1 })
	if qs := p.Queries(); len(qs) != 2 || !strings.Contains(qs[1], "(?:a|c)") {
		t.Fatalf("queries %q", qs)
	}
	// So do another group and another spec.
	if st = h.r.Observe("k", s, "g2", []string{"a", "c"}); st.Successes != 0 || st.Group != "g2" {
		t.Fatalf("group change: %+v", st)
	}
	s2 := s
	s2.Count = ptr(int32(1))
	h.observeUntil(t, "k", s2, "g2", []string{"a", "c"}, "success of the new spec", func(st workv1alpha1.AnalysisStatus) bool {
		return st.Phase == workv1alpha1.AnalysisSuccessful && st.Successes == 1
	})
}

func TestForgetDiscardsInFlight(t *testing.T) {
	release := make(chan struct{})
	p := newFakeProm(t, func(w http.ResponseWriter, r *http.Request, q string) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		reply(200, scalarBody("0"))(w, r, q)
	})
	h := start(t, p.URL)
	s := spec(testQuery, "result < 1", "", time.Second, 1, 0)
	h.r.Observe("k", s, "g", []string{"a"})
	waitFor(t, "the query", func() bool { return len(p.Queries()) == 1 })
	h.r.Forget("k")
	if h.r.Len() != 0 {
		t.Fatalf("Len %d after Forget", h.r.Len())
	}
	close(release)
	h.idle(t)
	if h.r.Len() != 0 || h.changed("k") != 0 {
		t.Fatalf("a forgotten analysis' result was recorded: Len %d, changes %d", h.r.Len(), h.changed("k"))
	}
	st := h.r.Observe("k", s, "g", []string{"a"})
	if st.Successes != 0 || st.Phase != workv1alpha1.AnalysisRunning {
		t.Fatalf("Observe after Forget: %+v", st)
	}
	h.observeUntil(t, "k", s, "g", []string{"a"}, "a fresh success", func(st workv1alpha1.AnalysisStatus) bool {
		return st.Phase == workv1alpha1.AnalysisSuccessful
	})
	// Forget of an unknown key is fine.
	h.r.Forget("nope")
}

func TestInFlightBound(t *testing.T) {
	release := make(chan struct{})
	p := newFakeProm(t, func(w http.ResponseWriter, r *http.Request, q string) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		reply(200, scalarBody("0"))(w, r, q)
	})
	h := start(t, p.URL)
	s := spec(testQuery, "result < 1", "", time.Second, 1, 0)
	const n = 12
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.r.Observe(fmt.Sprintf("k%d", i), s, "g", []string{"a"})
		}()
	}
	wg.Wait()
	waitFor(t, "MaxInFlight queries", func() bool { return len(p.Queries()) == MaxInFlight })
	close(release)
	waitFor(t, "every analysis done", func() bool {
		for i := range n {
			if h.r.Observe(fmt.Sprintf("k%d", i), s, "g", []string{"a"}).Phase != workv1alpha1.AnalysisSuccessful {
				return false
			}
		}
		return true
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.maxIn > MaxInFlight || len(p.queries) != n {
		t.Fatalf("%d queries at once (at most %d), %d in all (want %d)", p.maxIn, MaxInFlight, len(p.queries), n)
	}
}

func TestConcurrentObserveForget(t *testing.T) {
	p := newFakeProm(t, reply(200, scalarBody("0")))
	h := start(t, p.URL)
	s := spec(testQuery, "result < 1", "", time.Second, 3, 0)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				key := fmt.Sprintf("k%d", (w+i)%10)
				switch i % 3 {
				case 0, 1:
					st := h.r.Observe(key, s, "g", []string{"a", fmt.Sprint(i % 2)})
					if st.Group != "g" {
						t.Errorf("status %+v", st)
					}
				default:
					h.r.Forget(key)
				}
				if i%50 == 0 {
					h.clock.Step(time.Second)
				}
			}
		}()
	}
	wg.Wait()
	h.idle(t)
}

func TestMaxAnalyses(t *testing.T) {
	r := NewRunner(Options{}) // no loop: Observe alone
	s := spec(testQuery, "result < 1", "", time.Second, 1, 0)
	for i := range MaxAnalyses + 10 {
		r.Observe(strconv.Itoa(i), s, "g", []string{"a"})
		if i == MaxAnalyses-1 {
			r.Observe("0", s, "g", []string{"a"}) // recently observed: kept
		}
	}
	if r.Len() != MaxAnalyses {
		t.Fatalf("Len %d, want %d", r.Len(), MaxAnalyses)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.items["0"] == nil || r.items["1"] != nil || r.items["10"] != nil || r.items["11"] == nil || r.items[strconv.Itoa(MaxAnalyses+9)] == nil {
		t.Fatal("not the least recently observed dropped")
	}
}

func TestDefaults(t *testing.T) {
	s := settingsOf(policyv1alpha1.RolloutAnalysis{})
	if s.interval != DefaultInterval || s.count != 1 || s.failureLimit != 0 {
		t.Fatalf("defaults %+v", s)
	}
	s = settingsOf(policyv1alpha1.RolloutAnalysis{Interval: &metav1.Duration{Duration: time.Millisecond}})
	if s.interval != MinInterval {
		t.Fatalf("interval %s, want the minimum", s.interval)
	}
}

func TestTruncate(t *testing.T) {
	s := strings.Repeat("é", 1000) // 2000 bytes
	got := truncate(s, MaxMessageBytes)
	if len(got) > MaxMessageBytes || !utf8.ValidString(got) {
		t.Fatalf("%d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if got := truncate("ok\xff", 10); got != "ok\uFFFD" {
		t.Fatalf("invalid UTF-8: %q", got)
	}
}

func TestFirstSample(t *testing.T) {
	p := newFakeProm(t, reply(200, vectorBody(
		sample(`"cluster":"b"`, "0.9"), sample(`"cluster":"c","zone":"z"`, "0.5"), sample(`"cluster":"a"`, "0.01"))))
	h := start(t, p.URL)
	s := spec(testQuery, "result < 0.05", "result >= 0.05", time.Second, 1, 0)
	st := h.observeUntil(t, "k", s, "g", []string{"a", "b"}, "the end", func(st workv1alpha1.AnalysisStatus) bool {
		return st.Phase != workv1alpha1.AnalysisRunning
	})
	if st.Phase != workv1alpha1.AnalysisSuccessful || !strings.Contains(st.Message, `result 0.01 (the first of 3 samples, {cluster="a"})`) {
		t.Fatalf("status %+v", st)
	}
}
