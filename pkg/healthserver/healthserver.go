// Package healthserver serves a binary's /healthz, /readyz and /metrics.
//
// /healthz runs the registered liveness checks, which judge only the process
// itself (a kubelet liveness probe must not restart a pod because its hub is
// unreachable); /readyz runs the registered readiness checks. Both answer 503
// naming the failing checks; /metrics exposes the given Prometheus registry.
package healthserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// Check reports whether one dependency is ready; a nil error means ready.
type Check func(ctx context.Context) error

// checkTimeout bounds each readiness check so a hung dependency cannot hang
// the probe.
const checkTimeout = 5 * time.Second

// Server serves the health and metrics endpoints on one or two addresses.
type Server struct {
	healthAddr  string
	metricsAddr string
	registry    *prometheus.Registry
	profiling   bool

	mu      sync.RWMutex
	checks  map[string]Check
	healthz map[string]Check
}

// New returns a server for healthAddr (/healthz, /readyz) and metricsAddr
// (/metrics). Equal addresses share one listener; "0" disables an address.
func New(healthAddr, metricsAddr string, registry *prometheus.Registry) *Server {
	return &Server{healthAddr: healthAddr, metricsAddr: metricsAddr, registry: registry, checks: map[string]Check{}, healthz: map[string]Check{}}
}

// EnableProfiling serves Go's /debug/pprof/ handlers beside /metrics (as
// Kubernetes components' --profiling does), to read a heap or CPU profile
// of a running process. Off unless asked: the metrics address has no
// authentication.
func (s *Server) EnableProfiling() { s.profiling = true }

// AddReadyzCheck registers a named readiness check.
func (s *Server) AddReadyzCheck(name string, check Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[name] = check
}

// AddHealthzCheck registers a named liveness check. It must fail only when
// the process itself is broken (a restart would help).
func (s *Server) AddHealthzCheck(name string, check Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.healthz[name] = check
}

// Handler returns the mux serving every endpoint; exposed for tests.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.register(mux, true, true)
	return mux
}

func (s *Server) register(mux *http.ServeMux, health, metrics bool) {
	if health {
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { s.serveChecks(w, r, "healthz", s.healthz) })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) { s.serveChecks(w, r, "readyz", s.checks) })
	}
	if metrics {
		mux.Handle("/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry}))
		if s.profiling {
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
	}
}

func (s *Server) serveChecks(w http.ResponseWriter, r *http.Request, endpoint string, registered map[string]Check) {
	s.mu.RLock()
	names := make([]string, 0, len(registered))
	checks := make(map[string]Check, len(registered))
	for name, check := range registered {
		names = append(names, name)
		checks[name] = check
	}
	s.mu.RUnlock()
	sort.Strings(names)

	var out strings.Builder
	failed := false
	for _, name := range names {
		err := runBounded(r.Context(), checks[name])
		if err != nil {
			failed = true
			fmt.Fprintf(&out, "[-]%s failed: %v\n", name, err)
		} else {
			fmt.Fprintf(&out, "[+]%s ok\n", name)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if failed {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, "%s%s check failed\n", out.String(), endpoint)
		return
	}
	if _, verbose := r.URL.Query()["verbose"]; verbose {
		_, _ = fmt.Fprint(w, out.String())
	}
	_, _ = fmt.Fprint(w, "ok")
}

// runBounded runs check for at most checkTimeout, even if it ignores its
// context (a probe that outlasts the kubelet's timeout fails there anyway,
// and says nothing about why).
func runBounded(parent context.Context, check Check) error {
	ctx, cancel := context.WithTimeout(parent, checkTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- check(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer within %v: %w", checkTimeout, ctx.Err())
	}
}

// Run listens on the configured addresses and serves until ctx is done, then
// shuts down gracefully. A listen error is returned at once.
func (s *Server) Run(ctx context.Context) error {
	type endpoint struct{ health, metrics bool }
	byAddr := map[string]*endpoint{}
	if s.healthAddr != "0" && s.healthAddr != "" {
		byAddr[s.healthAddr] = &endpoint{health: true}
	}
	if s.metricsAddr != "0" && s.metricsAddr != "" {
		if e, ok := byAddr[s.metricsAddr]; ok {
			e.metrics = true
		} else {
			byAddr[s.metricsAddr] = &endpoint{metrics: true}
		}
	}

	var servers []*http.Server
	errs := make(chan error, len(byAddr))
	for addr, e := range byAddr {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, srv := range servers {
				_ = srv.Close()
			}
			return fmt.Errorf("listening on %s: %w", addr, err)
		}
		mux := http.NewServeMux()
		s.register(mux, e.health, e.metrics)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, srv)
		klog.InfoS("Serving", "address", ln.Addr().String(), "health", e.health, "metrics", e.metrics)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- err
			}
		}()
	}

	select {
	case <-ctx.Done():
	case err := <-errs:
		for _, srv := range servers {
			_ = srv.Close()
		}
		return err
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(shutdownCtx)
	}
	return nil
}

// Start runs Run in a goroutine and returns the channel its result comes
// on. A server that cannot serve (its address in use, say) calls stop: a
// process without the endpoints its probes and Prometheus read would be
// restarted by the kubelet later, and nobody would see why, so it stops
// now with the error, as a controller manager whose metrics server cannot
// start does.
func (s *Server) Start(ctx context.Context, stop context.CancelFunc) <-chan error {
	done := make(chan error, 1)
	go func() {
		err := s.Run(ctx)
		if err != nil {
			klog.ErrorS(err, "Health and metrics server stopped; the process stops")
			stop()
		}
		done <- err
	}()
	return done
}

// RideOut is check as the readiness of a process that keeps serving from its
// last view when the dependency check probes goes away: it fails until
// check first succeeds, and afterwards only once check has failed for longer
// than horizon since its last success. It runs check itself every interval
// until ctx ends, so the state does not depend on anyone probing before an
// outage, and after the first success answers at once from the last result:
// a dependency that hangs must not make the probe outlast the kubelet's
// timeout. The hub's DNS traffic manager and webhook serve without the host
// apiserver; a replica going unready the moment that apiserver is
// unreachable would take its answers off its Service for nothing.
func RideOut(ctx context.Context, check Check, horizon, interval time.Duration, now func() time.Time) Check {
	r := &rideOut{check: check, horizon: horizon, now: now}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			r.runOnce(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return r.ready
}

type rideOut struct {
	check   Check
	horizon time.Duration
	now     func() time.Time

	mu      sync.Mutex
	lastOK  time.Time
	lastErr error
}

// runOnce runs the check, bounded by checkTimeout, and records the result.
func (r *rideOut) runOnce(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	start := r.now()
	err := r.check(cctx)
	if ctx.Err() != nil {
		return
	}
	r.record(start, err)
}

func (r *rideOut) ready(ctx context.Context) error {
	r.mu.Lock()
	passed := !r.lastOK.IsZero()
	r.mu.Unlock()
	if !passed {
		start := r.now()
		err := r.check(ctx)
		r.record(start, err)
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastErr == nil || r.now().Sub(r.lastOK) <= r.horizon {
		return nil
	}
	return fmt.Errorf("%w (failing since at least %s, past %s)", r.lastErr, r.lastOK.Format(time.RFC3339), r.horizon)
}

func (r *rideOut) record(start time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastErr = err
	if err == nil && start.After(r.lastOK) {
		r.lastOK = start
	}
}
