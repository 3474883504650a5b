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
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// Bounds of a Runner.
const (
	// MaxAnalyses is how many analyses a Runner keeps; past it the least
	// recently observed is dropped.
	MaxAnalyses = 4096
	// MaxInFlight is how many queries run at once.
	MaxInFlight = 4
	// MaxMessageBytes bounds AnalysisStatus.Message.
	MaxMessageBytes = 1024
)

// Options configure a Runner.
type Options struct {
	// Address is the Prometheus base URL (the hub's
	// --rollout-prometheus-address). Empty: there is no Prometheus, and
	// every measurement is inconclusive.
	Address string
	// OnChange is called, from a background goroutine and without any
	// lock held, with the key of an analysis whose status changed. It
	// should not block (enqueue the key); a query slot waits for it.
	OnChange func(key string)
	// Clock schedules the measurements. Default clock.RealClock{}.
	Clock clock.Clock
	// Timeout bounds each query. Default DefaultTimeout.
	Timeout time.Duration
	// Registerer, when set, gets the measurement counter.
	Registerer prometheus.Registerer

	// transport replaces the HTTP transport (tests).
	transport http.RoundTripper
}

// Runner runs analyses. Observe and Forget are safe for concurrent use.
type Runner struct {
	api      promv1.API
	apiError string // why there is no api
	onChange func(string)
	clock    clock.Clock
	timeout  time.Duration
	counter  *prometheus.CounterVec

	kick chan struct{}

	mu       sync.Mutex
	items    map[string]*analysis
	lru      *list.List // of *analysis, most recently observed first
	inflight int
}

// settings are an analysis' defaulted parameters.
type settings struct {
	query, success, failure string
	interval                time.Duration
	count, failureLimit     int32
}

func settingsOf(spec policyv1alpha1.RolloutAnalysis) settings {
	s := settings{
		query:    spec.Prometheus.Query,
		success:  spec.SuccessCondition,
		failure:  spec.FailureCondition,
		interval: DefaultInterval,
		count:    1,
	}
	if spec.Interval != nil && spec.Interval.Duration != 0 {
		s.interval = max(spec.Interval.Duration, MinInterval)
	}
	if spec.Count != nil && *spec.Count > 1 {
		s.count = *spec.Count
	}
	if spec.FailureLimit != nil && *spec.FailureLimit > 0 {
		s.failureLimit = *spec.FailureLimit
	}
	return s
}

// analysis is one key's state. A restart replaces it by a new one, so a
// measurement in flight knows its result is stale.
type analysis struct {
	key      string
	elem     *list.Element
	settings settings
	group    string
	clusters []string // sorted, unique

	status  workv1alpha1.AnalysisStatus
	next    time.Time // when the next measurement is due
	running bool      // a measurement is in flight

	conds *conditions // compiled on the first measurement; only its measurement touches it
}

func (a *analysis) terminal() bool { return a.status.Phase != workv1alpha1.AnalysisRunning }

// NewRunner returns a Runner; start its loop with Run.
func NewRunner(opts Options) *Runner {
	r := &Runner{
		onChange: opts.OnChange,
		clock:    opts.Clock,
		timeout:  opts.Timeout,
		kick:     make(chan struct{}, 1),
		items:    map[string]*analysis{},
		lru:      list.New(),
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.timeout <= 0 {
		r.timeout = DefaultTimeout
	}
	r.api, r.apiError = newAPI(opts.Address, opts.transport, r.timeout)
	counter := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "flotilla",
		Subsystem: "rollout_analysis",
		Name:      "measurements_total",
		Help:      "Measurements of rollout analyses, by result (success, failure, inconclusive).",
	}, []string{"result"})
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(counter); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				panic(fmt.Sprintf("rolloutanalysis: registering %s: %v", "flotilla_rollout_analysis_measurements_total", err))
			}
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				counter = existing
			}
		}
	}
	for _, res := range []result{resultSuccess, resultFailure, resultInconclusive} {
		counter.WithLabelValues(res.String())
	}
	r.counter = counter
	return r
}

// normalize returns a sorted copy of clusters without duplicates.
func normalize(clusters []string) []string {
	out := slices.Clone(clusters)
	if !sort.StringsAreSorted(out) {
		sort.Strings(out)
	}
	return slices.Compact(out)
}

// Observe returns the status of key's analysis, starting it when key is new
// or when spec, group or clusters changed (its counts reset). It never
// waits for a measurement.
func (r *Runner) Observe(key string, spec policyv1alpha1.RolloutAnalysis, group string, clusters []string) workv1alpha1.AnalysisStatus {
	s := settingsOf(spec)
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.items[key]
	if old != nil && old.settings == s && old.group == group && sameClusters(old.clusters, clusters) {
		r.lru.MoveToFront(old.elem)
		return old.status
	}
	a := &analysis{
		key:      key,
		settings: s,
		group:    group,
		clusters: normalize(clusters),
		status: workv1alpha1.AnalysisStatus{
			Group:   group,
			Phase:   workv1alpha1.AnalysisRunning,
			Message: "waiting for the first measurement",
		},
	}
	if old != nil {
		a.elem = old.elem
		a.elem.Value = a
		r.lru.MoveToFront(a.elem)
	} else {
		a.elem = r.lru.PushFront(a)
		for r.lru.Len() > MaxAnalyses {
			oldest := r.lru.Back()
			r.lru.Remove(oldest)
			delete(r.items, oldest.Value.(*analysis).key)
		}
	}
	r.items[key] = a
	r.wake()
	return a.status
}

// sameClusters says whether clusters (in any order, with duplicates) is the
// set stored, sorted and unique, in have.
func sameClusters(have, clusters []string) bool {
	if slices.Equal(have, clusters) {
		return true
	}
	if len(clusters) < len(have) {
		return false
	}
	return slices.Equal(have, normalize(clusters))
}

// Forget drops key's analysis; a measurement in flight for it is
// discarded.
func (r *Runner) Forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.items[key]; a != nil {
		r.lru.Remove(a.elem)
		delete(r.items, key)
	}
}

// Len is how many analyses the Runner keeps.
func (r *Runner) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.items)
}

func (r *Runner) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run measures until ctx is done, then waits for the measurements in
// flight (their results are discarded) and returns.
func (r *Runner) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		due, next, ok := r.takeDue()
		for _, a := range due {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.measureAndApply(ctx, a)
			}()
		}
		var timer clock.Timer
		var fire <-chan time.Time
		if ok {
			timer = r.clock.NewTimer(next.Sub(r.clock.Now()))
			fire = timer.C()
			// The clock may have moved between reading it and setting
			// the timer (a fake clock stepped by a test).
			if !r.clock.Now().Before(next) {
				timer.Stop()
				continue
			}
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-r.kick:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// takeDue marks the due analyses, earliest first, as running (as many as
// MaxInFlight allows) and returns them, and when the next one is due, if
// any is waiting and a query slot is free.
func (r *Runner) takeDue() (due []*analysis, next time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	free := MaxInFlight - r.inflight
	if free <= 0 {
		return nil, time.Time{}, false
	}
	now := r.clock.Now()
	var ready []*analysis
	for _, a := range r.items {
		if a.running || a.terminal() {
			continue
		}
		if !a.next.After(now) {
			ready = append(ready, a)
		} else if !ok || a.next.Before(next) {
			next, ok = a.next, true
		}
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i].next.Before(ready[j].next) })
	if len(ready) > free {
		// The rest are due now: come back when a slot frees.
		ready, ok = ready[:free], false
	}
	for _, a := range ready {
		a.running = true
		r.inflight++
	}
	return ready, next, ok
}

// measureAndApply measures a (taken by takeDue) and records the outcome if
// a is still the analysis of its key.
func (r *Runner) measureAndApply(ctx context.Context, a *analysis) {
	out := r.measure(ctx, a)
	cancelled := ctx.Err() != nil
	r.mu.Lock()
	r.inflight--
	a.running = false
	current := r.items[a.key] == a && !cancelled
	var changed bool
	if current {
		old := a.status
		apply(&a.status, a.settings, out)
		a.next = r.clock.Now().Add(a.settings.interval)
		changed = a.status != old
	}
	r.mu.Unlock()
	r.wake()
	if current {
		r.counter.WithLabelValues(out.result.String()).Inc()
	}
	if changed && r.onChange != nil {
		r.onChange(a.key)
	}
}

// apply counts out in st and sets its phase and message.
func apply(st *workv1alpha1.AnalysisStatus, s settings, out outcome) {
	msg := out.message
	switch out.result {
	case resultSuccess:
		st.Successes++
		msg += fmt.Sprintf(" (%d of %d successes)", st.Successes, s.count)
		if st.Successes >= s.count {
			st.Phase = workv1alpha1.AnalysisSuccessful
		}
	case resultFailure:
		st.Failures++
		msg += fmt.Sprintf(" (%d failed, %d tolerated)", st.Failures, s.failureLimit)
		if st.Failures > s.failureLimit {
			st.Phase = workv1alpha1.AnalysisFailed
		}
	default:
		st.Inconclusive++
		st.Phase = workv1alpha1.AnalysisInconclusive
	}
	st.Message = truncate(msg, MaxMessageBytes)
}

// measure runs one measurement of a.
func (r *Runner) measure(ctx context.Context, a *analysis) (out outcome) {
	defer func() {
		if p := recover(); p != nil {
			out = inconclusive("internal error measuring: %v", p)
		}
	}()
	if a.conds == nil {
		c, err := compileConditions(policyv1alpha1.RolloutAnalysis{SuccessCondition: a.settings.success, FailureCondition: a.settings.failure})
		if err != nil {
			return inconclusive("%v", err)
		}
		a.conds = c
	}
	if r.api == nil {
		return inconclusive("%s", r.apiError)
	}
	if len(a.clusters) == 0 {
		return inconclusive("no clusters to measure")
	}
	query, err := buildQuery(a.settings.query, a.clusters)
	if err != nil {
		return inconclusive("prometheus.query: %v", err)
	}
	qctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	val, _, err := r.api.Query(qctx, query, time.Time{})
	if err != nil {
		var ne net.Error
		if errors.Is(qctx.Err(), context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			return inconclusive("the Prometheus query timed out after %s", r.timeout)
		}
		msg := err.Error()
		var perr *promv1.Error
		if errors.As(err, &perr) && perr.Detail != "" {
			msg += " (" + truncate(perr.Detail, 256) + ")"
		}
		return inconclusive("the Prometheus query failed: %s", msg)
	}
	v, what, ok := valueOf(val)
	if !ok {
		return inconclusive("%s", what)
	}
	return evaluate(a.conds, v, what)
}
