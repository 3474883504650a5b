package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/flotilla-io/flotilla/hack/bench/benchutil"
)

// sampler reads the hub's /metrics every period: RSS (peak) and CPU seconds
// through the run, with marks at the end of each phase.
type sampler struct {
	addr, pidFile string

	mu        sync.Mutex
	start     time.Time
	cpu0      float64
	lastCPU   float64
	lastAt    time.Time
	peakRSS   float64
	peakAt    time.Time
	restarts  int
	cpuOffset float64 // CPU of hub processes before a restart
	marks     []mark
}

type mark struct {
	name      string
	at        time.Time
	cpu, peak float64
}

func newSampler(addr, pidFile string) *sampler { return &sampler{addr: addr, pidFile: pidFile} }

func (s *sampler) run(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		s.once()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sampler) once() {
	m, err := benchutil.Scrape(s.addr)
	if err != nil {
		return // the hub stopped (the floors) or restarted
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	cpu := m["process_cpu_seconds_total"]
	if s.start.IsZero() {
		s.start, s.cpu0 = now, cpu
	} else if cpu+s.cpuOffset < s.lastCPU {
		s.restarts++
		s.cpuOffset = s.lastCPU
	}
	s.lastCPU, s.lastAt = cpu+s.cpuOffset, now
	if rss := m["process_resident_memory_bytes"]; rss > s.peakRSS {
		s.peakRSS, s.peakAt = rss, now
	}
}

// mark ends a phase.
func (s *sampler) mark(name string) {
	s.once()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marks = append(s.marks, mark{name: name, at: s.lastAt, cpu: s.lastCPU, peak: s.peakRSS})
}

// vmHWM is the hub process's peak RSS from /proc (0 when unknown).
func (s *sampler) vmHWM() float64 {
	pid, err := os.ReadFile(s.pidFile)
	if err != nil {
		return 0
	}
	f, err := os.Open("/proc/" + strings.TrimSpace(string(pid)) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			var kb float64
			_, _ = fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
			return kb * 1024
		}
	}
	return 0
}

// reportHub prints (c): the hub's CPU per phase and for the whole run, and
// its peak RSS.
func (b *bench) reportHub() {
	s := b.sampler
	hwm := s.vmHWM()
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Printf("\n(c) The hub through the run (its /metrics every %s):\n\n| phase | wall | hub CPU (average) | hub RSS peak so far |\n|---|---|---|---|\n", b.o.sample)
	prevAt, prevCPU := s.start, s.cpu0
	for _, m := range s.marks {
		wall := m.at.Sub(prevAt)
		fmt.Printf("| %s | %s | %.2f cores | %.0f MiB |\n", m.name, r1(wall), (m.cpu-prevCPU)/wall.Seconds(), m.peak/(1<<20))
		prevAt, prevCPU = m.at, m.cpu
	}
	wall := s.lastAt.Sub(s.start)
	avg := (s.lastCPU - s.cpu0) / wall.Seconds()
	fmt.Printf("| **whole run** | %s | **%.2f cores** | **%.0f MiB** |\n", r1(wall), avg, s.peakRSS/(1<<20))
	if hwm > 0 {
		fmt.Printf("\nhub VmHWM (/proc): %.0f MiB", hwm/(1<<20))
	}
	if s.restarts > 0 {
		fmt.Printf("; the hub restarted %d times during the run", s.restarts)
	}
	fmt.Println()
	b.add("(c) hub CPU, average over the run", fmt.Sprintf("%.2f cores", avg), "≤ 1 core")
	peak := fmt.Sprintf("%.0f MiB", s.peakRSS/(1<<20))
	if hwm > 0 {
		peak += fmt.Sprintf(" (VmHWM %.0f MiB)", hwm/(1<<20))
	}
	b.add("(c) hub RSS, peak", peak, "≤ 1 GiB")
}

// scrape is benchutil.Scrape plus the eviction counters by reason/result
// ("evictions <reason>/<result>").
func scrape(addr string) (map[string]float64, error) {
	out, err := benchutil.Scrape(addr)
	if err != nil {
		return nil, err
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	label := func(line, name string) string {
		_, rest, _ := strings.Cut(line, name+`="`)
		v, _, _ := strings.Cut(rest, `"`)
		return v
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) < 2 || !strings.HasPrefix(line, "flotilla_eviction_evictions_total{") {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(fields[len(fields)-1], &v); err == nil {
			out["evictions "+label(line, "reason")+"/"+label(line, "result")] += v
		}
	}
	return out, sc.Err()
}

// queueDepth is the sum of the hub's workqueue_depth gauges.
func queueDepth(addr string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "workqueue_depth{") {
			continue
		}
		fields := strings.Fields(line)
		var v float64
		if _, err := fmt.Sscan(fields[len(fields)-1], &v); err == nil {
			sum += v
		}
	}
	return sum, sc.Err()
}

func evictionDelta(before, after map[string]float64) string {
	var parts []string
	for k, v := range after {
		if strings.HasPrefix(k, "evictions ") && v-before[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%.0f", strings.TrimPrefix(k, "evictions "), v-before[k]))
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
