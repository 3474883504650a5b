package bindingstatus

import (
	"flag"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

var (
	holdSeed      = flag.Int64("hold-seed", 0, "replay one schedule of TestHoldInvariants")
	holdSchedules = flag.Int("hold-schedules", 150, "schedules TestHoldInvariants runs")
)

// TestHoldInvariants runs seeded random schedules of what the hub's
// controllers do to one new binding's status (parts submitted at every
// stage by both authors, the binding controller told of changes, syncs
// that start and end in any order, time passing) and checks after every
// step that:
//
//  1. a settled part is written at once, with every part held for the
//     binding;
//  2. nothing is held past MaxBehindFactor holds from its first part;
//  3. while the hub is not behind (every change counted has been synced),
//     nothing is held past maxHoldFactor holds from its first part, nor
//     past one hold from the first part that waits for agents;
//  4. there are never more status writes than parts submitted;
//
// and at the end, once every sync is over and the bound has passed, that
// nothing is held any more. The writer's queue is played by a flush after
// every step: the schedules check when a hold is due, not the queue's
// wake-ups. A failure prints the seed; -hold-seed=N replays it (-v shows
// its steps).
func TestHoldInvariants(t *testing.T) {
	seeds := make([]int64, 0, *holdSchedules)
	if *holdSeed != 0 {
		seeds = append(seeds, *holdSeed)
	} else {
		for i := range *holdSchedules {
			seeds = append(seeds, int64(i+1))
		}
	}
	for _, seed := range seeds {
		if err := runHoldSchedule(t, seed); err != nil {
			t.Fatalf("seed %d: %v (replay: go test ./pkg/hub/bindingstatus -run TestHoldInvariants -hold-seed=%d)", seed, err, seed)
		}
	}
}

func runHoldSchedule(t *testing.T, seed int64) error {
	const key = "ns/app-deployment"
	r := rand.New(rand.NewSource(seed))
	b := newBinding()
	e := newEnv(t, b)
	var syncs []uint64 // tokens of the binding controller's syncs under way
	submitted := 0
	steps := 20 + r.Intn(60)
	for step := range steps {
		var what string
		settled := false
		switch op := r.Intn(10); {
		case op < 4:
			author := []string{"scheduler", "binding"}[r.Intn(2)]
			stage := []Stage{HubStage, AgentStage, AgentStage, HubStage, Settled}[r.Intn(5)]
			settled = stage == Settled
			what = fmt.Sprintf("%s part at stage %d", author, stage)
			msg := fmt.Sprintf("step %d", step)
			part := func(s *workv1alpha1.ResourceBindingStatus) {
				meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: "Step-" + author, Status: metav1.ConditionTrue, Reason: "Step", Message: msg})
			}
			if author == "scheduler" && r.Intn(3) == 0 {
				part = scheduledPart(msg) // the binding shows a status from now on
			}
			if err := e.w.Write(e.ctx, b, author, part, stage); err != nil {
				return fmt.Errorf("step %d (%s): %v", step, what, err)
			}
			submitted++
		case op < 5:
			what = "a change queued for the binding controller"
			e.w.Changed(key)
		case op < 6:
			what = "a binding controller sync starts"
			syncs = append(syncs, e.w.Summing(key))
		case op < 7 && len(syncs) > 0:
			i := r.Intn(len(syncs))
			what = fmt.Sprintf("a binding controller sync ends (token %d)", syncs[i])
			e.w.Summed(key, syncs[i])
			syncs = append(syncs[:i], syncs[i+1:]...)
		default:
			d := []time.Duration{time.Second, hold / 2, hold, 3 * hold, maxHoldFactor * hold}[r.Intn(5)]
			what = fmt.Sprintf("%s pass", d)
			e.clock.Step(d)
		}
		// The writer's queue: every delayed add comes when due.
		if err := e.w.flushDue(e.ctx, key); err != nil {
			return fmt.Errorf("step %d (%s): flush: %v", step, what, err)
		}
		// The fake apiserver keeps no resourceVersions, so the writer
		// cannot tell its last write from an older cache (a real one can,
		// Writer.latest): let the cache catch up, as it does in a moment.
		if err := cacheCaughtUp(e, key); err != nil {
			return fmt.Errorf("step %d (%s): %v", step, what, err)
		}
		if testing.Verbose() && *holdSeed != 0 {
			t.Logf("step %d: %s; writes %d", step, what, e.writes())
		}
		if err := checkHold(e, key, settled); err != nil {
			return fmt.Errorf("step %d (%s): %v", step, what, err)
		}
		if n := e.writes(); n > submitted {
			return fmt.Errorf("step %d (%s): %d status writes for %d parts", step, what, n, submitted)
		}
	}
	for _, token := range syncs {
		e.w.Summed(key, token)
	}
	e.clock.Step(MaxBehindFactor * hold)
	if err := e.w.flushDue(e.ctx, key); err != nil {
		return fmt.Errorf("end: flush: %v", err)
	}
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	if h := e.w.pending[key]; h != nil {
		return fmt.Errorf("end: %d parts still held after every sync and the bound", len(h.parts))
	}
	return nil
}

// cacheCaughtUp waits until the writer's cache holds the stored status.
func cacheCaughtUp(e *env, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	stored, err := e.client.WorkV1alpha1().ResourceBindings(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if cached, err := e.w.bindings.Get(key); err == nil && apiequality.Semantic.DeepEqual(cached.Status, stored.Status) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cache never caught up with the stored status")
		}
		time.Sleep(time.Millisecond)
	}
}

// checkHold checks invariants 1–3 of TestHoldInvariants on the writer's
// state now.
func checkHold(e *env, key string, settled bool) error {
	stored, err := e.w.bindings.Get(key)
	if err != nil {
		return err
	}
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	h := e.w.pending[key]
	if h == nil {
		return nil
	}
	if settled {
		return fmt.Errorf("a settled part left %d parts held", len(h.parts))
	}
	if shown(e.w.latest(key, stored)) {
		return fmt.Errorf("%d parts held for a binding that shows a status", len(h.parts))
	}
	now := e.clock.Now()
	if bound := h.first.Add(MaxBehindFactor * hold); !now.Before(bound) {
		return fmt.Errorf("parts held %s after the first, past MaxBehindFactor holds", now.Sub(h.first))
	}
	if h.changed > h.synced {
		return nil // the hub is behind: only the outer bound holds
	}
	if bound := h.first.Add(maxHoldFactor * hold); !now.Before(bound) {
		return fmt.Errorf("parts held %s after the first with the hub not behind, past maxHoldFactor holds", now.Sub(h.first))
	}
	if !h.agentsAt.IsZero() && !now.Before(h.agentsAt.Add(hold)) {
		return fmt.Errorf("parts held %s after the first that waits for agents, with the hub not behind", now.Sub(h.agentsAt))
	}
	return nil
}
