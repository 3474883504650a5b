package faultschedule

import (
	"flag"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

var (
	seedFlag      = flag.Int64("seed", 0, "replay only this schedule seed (also FLOTILLA_FAULT_SEED)")
	schedulesFlag = flag.Int("schedules", 0, "random schedules to run instead of the fixed CI seeds (also SOAK_SCHEDULES)")
	stepsFlag     = flag.Int("steps", 0, "steps per schedule (default 12; also FLOTILLA_FAULT_STEPS)")
)

// ciSeeds are the fixed schedules `make test` runs.
var ciSeeds = []int64{1, 2, 5}

// TestFaultSchedules runs the real hub against a real apiserver with
// simulated members through seeded random schedules of faults and changes
// and checks the failover invariants after every step. A failure prints
// the seed; `go test ./test/faultschedule -run TestFaultSchedules
// -args -seed=N` (or FLOTILLA_FAULT_SEED=N) replays that schedule.
func TestFaultSchedules(t *testing.T) {
	seeds := ciSeeds
	if s := envInt("FLOTILLA_FAULT_SEED", *seedFlag); s != 0 {
		seeds = []int64{s}
	} else if n := envInt("SOAK_SCHEDULES", int64(*schedulesFlag)); n > 0 {
		r := rand.New(rand.NewSource(time.Now().UnixNano()))
		seeds = nil
		for range n {
			seeds = append(seeds, 1+r.Int63n(1<<40))
		}
		t.Logf("soak: %d random schedules, seeds %v", n, seeds)
	}
	steps := int(envInt("FLOTILLA_FAULT_STEPS", int64(*stepsFlag)))
	if steps == 0 {
		steps = 12
	}
	// The hub's log goes to a file per failing seed, unless
	// FLOTILLA_FAULT_HUBLOG asks for it on stderr.
	ctrllog.SetLogger(logr.Discard()) // envtest logs through controller-runtime
	var hubLog *HubLog
	if os.Getenv("FLOTILLA_FAULT_HUBLOG") == "" {
		hubLog = CaptureKlog()
		defer klog.SetOutput(os.Stderr)
	}
	var clean, cleanSteps, totalSteps int
	var failed []string
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			if hubLog != nil {
				hubLog.Reset()
			}
			sched := Generate(seed, 0, 0, steps)
			t.Logf("seed %d: %d clusters, %d workloads, steps:\n%s", seed, len(sched.Clusters), len(sched.Workloads), describe(sched))
			res := Run(t, sched, Config{Settle: 45 * time.Second, Log: t.Logf})
			totalSteps += res.Steps
			if len(res.Violations) == 0 {
				clean++
				cleanSteps += res.Steps
				return
			}
			failed = append(failed, strconv.FormatInt(seed, 10))
			if hubLog != nil {
				if path, err := hubLog.Save(fmt.Sprintf("flotilla-fault-seed-%d.log", seed)); err == nil {
					t.Logf("hub log of seed %d: %s", seed, path)
				}
			}
			t.Errorf("seed %d: %d violation(s) after %d steps (replay: go test ./test/faultschedule -run TestFaultSchedules -args -seed=%d)\nsteps run:\n%s\nviolations:\n%s",
				seed, len(res.Violations), res.Steps, seed, describeSteps(sched.Steps[:res.Steps]), strings.Join(res.Violations, "\n"))
		})
	}
	t.Logf("fault schedules: %d of %d ran clean (%d of %d steps in clean schedules); failing seeds: %v",
		clean, len(seeds), cleanSteps, totalSteps, failed)
}

func envInt(name string, def int64) int64 {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return def
}

func describe(s Schedule) string {
	var b strings.Builder
	for _, c := range s.Clusters {
		fmt.Fprintf(&b, "  cluster %s region=%q\n", c.Name, c.Region)
	}
	for i, w := range s.Workloads {
		fmt.Fprintf(&b, "  workload w%d replicas=%d %s names=%v region=%q\n", i, w.Replicas, w.Variant, w.Names, w.Region)
	}
	b.WriteString(describeSteps(s.Steps))
	return b.String()
}

func describeSteps(steps []Step) string {
	var b strings.Builder
	for i, s := range steps {
		fmt.Fprintf(&b, "  %d: %s\n", i, s)
	}
	return b.String()
}

// The schedule is a function of the seed alone.
func TestGenerateIsDeterministic(t *testing.T) {
	for seed := int64(1); seed < 50; seed++ {
		a, b := Generate(seed, 0, 0, 30), Generate(seed, 0, 0, 30)
		if describe(a) != describe(b) {
			t.Fatalf("seed %d: two schedules differ:\n%s\n%s", seed, describe(a), describe(b))
		}
	}
}

// The safety checks fire: a healthy, uninvolved cluster losing replicas
// (3), an eviction during a fleet-wide outage (4), a placement flapping
// (6) and a Work deleted without a task (3) are each reported.
func TestSafetyChecksFire(t *testing.T) {
	newHarness := func() *Harness {
		h := &Harness{members: map[string]*Member{}, touched: map[string]bool{}, touchedW: map[int]bool{},
			lastBinding: map[string]*workv1alpha1.ResourceBinding{}, taskSeen: map[string][]time.Time{},
			left: map[string]int{}, reentries: map[string]int{}, recorded: map[types.UID]bool{}}
		for _, c := range []string{"m1", "m2", "m3"} {
			h.members[c] = newMember(c, "", 10, nil, nil, nil, 1)
		}
		h.beginStep(0, Step{Kind: StepHubRestart, Workload: -1}, false)
		return h
	}
	rb := func(tasks []string, clusters ...string) *workv1alpha1.ResourceBinding {
		b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "w0-deployment", Namespace: Namespace}}
		for _, c := range clusters {
			b.Spec.Clusters = append(b.Spec.Clusters, workv1alpha1.TargetCluster{Name: c, Replicas: 2})
		}
		for _, c := range tasks {
			b.Spec.GracefulEvictionTasks = append(b.Spec.GracefulEvictionTasks, workv1alpha1.GracefulEvictionTask{FromCluster: c})
		}
		return b
	}
	expect := func(h *Harness, want string) {
		t.Helper()
		h.judgeDeletions()
		got := h.snapshotViolations()
		if !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, want) }) {
			t.Errorf("violations %q, want one with %q", got, want)
		}
	}

	h := newHarness()
	h.onBinding(rb(nil, "m1", "m2"))
	h.onBinding(rb(nil, "m1"))
	expect(h, "invariant 3 (a healthy cluster's replicas never drop")

	h = newHarness()
	h.onBinding(rb(nil, "m1", "m2"))
	h.beginStep(1, Step{Kind: StepOutage, Clusters: []string{"m1", "m2", "m3"}, Workload: -1}, false)
	h.outageStart = time.Now().Add(-time.Minute) // the hub has noticed
	h.onBinding(rb([]string{"m1"}, "m1", "m2"))
	expect(h, "invariant 4")

	h = newHarness()
	h.onBinding(rb(nil, "m1", "m2"))
	h.beginStep(1, Step{Kind: StepKill, Clusters: []string{"m1"}, Workload: -1}, false)
	h.onBinding(rb([]string{"m1"}, "m2"))
	h.beginStep(2, Step{Kind: StepHubRestart, Workload: -1}, false)
	for range 2 {
		h.onBinding(rb([]string{"m1"}, "m2"))
		h.onBinding(rb([]string{"m1"}, "m1", "m2"))
	}
	expect(h, "invariant 6")

	h = newHarness()
	h.onWork(&workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "flotilla-es-m2", UID: "u1",
		Annotations: map[string]string{workobjects.AnnotationCluster: "m2", workobjects.AnnotationBindingName: "w0-deployment"}}}, true)
	expect(h, "no Work deleted without a graceful eviction task")

	h = newHarness()
	h.beginStep(1, Step{Kind: StepOutage, Clusters: []string{"m1", "m2", "m3"}, Workload: -1}, false)
	h.outageStart = time.Now().Add(-time.Minute)
	h.onWork(&workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "flotilla-es-m2", UID: "u2", DeletionTimestamp: &metav1.Time{Time: time.Now()},
		Annotations: map[string]string{workobjects.AnnotationCluster: "m2", workobjects.AnnotationBindingName: "w0-deployment"}}}, false)
	expect(h, "a fleet-wide outage deletes no Work")
}
