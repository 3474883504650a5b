package bindingstatus

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
)

const hold = 30 * time.Second

type env struct {
	w      *Writer
	client *fake.Clientset
	clock  *clocktesting.FakeClock
	ctx    context.Context
}

func newEnv(t *testing.T, b *workv1alpha1.ResourceBinding) *env {
	t.Helper()
	client := fake.NewSimpleClientset(b)
	factory := flotillainformers.NewSharedInformerFactory(client, 0)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	w := NewWriter(client, factory, hold, clk)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	client.ClearActions()
	return &env{w: w, client: client, clock: clk, ctx: ctx}
}

// writes counts status updates sent to the API.
func (e *env) writes() int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func (e *env) stored(t *testing.T) *workv1alpha1.ResourceBinding {
	t.Helper()
	b, err := e.client.WorkV1alpha1().ResourceBindings("ns").Get(e.ctx, "app-deployment", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cached waits until the writer's cache holds a binding that ok accepts.
func (e *env) cached(t *testing.T, ok func(*workv1alpha1.ResourceBinding) bool) *workv1alpha1.ResourceBinding {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := e.w.bindings.Get("ns/app-deployment"); err == nil && ok(b) {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache never caught up")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newBinding() *workv1alpha1.ResourceBinding {
	return &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: "app-deployment", Namespace: "ns", UID: "u1", Generation: 2},
		Spec: workv1alpha1.ResourceBindingSpec{Placement: &policyv1alpha1.Placement{}}}
}

func scheduledPart(message string) Part {
	return func(s *workv1alpha1.ResourceBindingStatus) {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue,
			Reason: "BindingScheduled", Message: message, ObservedGeneration: 2})
		s.SchedulerObservedGeneration = 2
	}
}

func appliedPart(applied bool) Part {
	return func(s *workv1alpha1.ResourceBindingStatus) {
		status := metav1.ConditionFalse
		if applied {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: workv1alpha1.BindingConditionFullyApplied, Status: status,
			Reason: "x", ObservedGeneration: 2})
		s.AggregatedStatus = []workv1alpha1.AggregatedStatusItem{{ClusterName: "member1", Applied: applied}}
	}
}

// A new binding's scheduler and binding-controller parts on their way are
// held; the part that settles writes them all in one request.
func TestNewBindingFirstStatusIsOneWrite(t *testing.T) {
	b := newBinding()
	e := newEnv(t, b)
	if err := e.w.Write(e.ctx, b, "scheduler", scheduledPart("scheduled to member1(1)"), HubStage); err != nil {
		t.Fatal(err)
	}
	if err := e.w.Write(e.ctx, b, "binding", appliedPart(false), AgentStage); err != nil {
		t.Fatal(err)
	}
	if n := e.writes(); n != 0 {
		t.Fatalf("%d status writes while in flight, want 0", n)
	}
	// Controllers read what is held.
	view := e.w.View(b)
	if !meta.IsStatusConditionTrue(view.Status.Conditions, workv1alpha1.BindingConditionScheduled) || view.Status.SchedulerObservedGeneration != 2 {
		t.Fatalf("view does not show the held Scheduled part: %+v", view.Status)
	}
	if b.Status.Conditions != nil {
		t.Fatal("View changed the cached binding")
	}
	if err := e.w.Write(e.ctx, b, "binding", appliedPart(true), Settled); err != nil {
		t.Fatal(err)
	}
	if n := e.writes(); n != 1 {
		t.Fatalf("%d status writes when settled, want 1", n)
	}
	got := e.stored(t)
	if !meta.IsStatusConditionTrue(got.Status.Conditions, workv1alpha1.BindingConditionScheduled) ||
		!meta.IsStatusConditionTrue(got.Status.Conditions, workv1alpha1.BindingConditionFullyApplied) {
		t.Fatalf("stored status lacks a part: %+v", got.Status.Conditions)
	}
	// Nothing is held any more, and the same parts again (read from the
	// cache, as controllers do) write nothing.
	cached := e.cached(t, func(b *workv1alpha1.ResourceBinding) bool {
		return meta.IsStatusConditionTrue(b.Status.Conditions, workv1alpha1.BindingConditionFullyApplied)
	})
	if err := e.w.Write(e.ctx, cached, "binding", appliedPart(true), Settled); err != nil {
		t.Fatal(err)
	}
	if n := e.writes(); n != 1 {
		t.Fatalf("%d status writes after an unchanged part, want 1", n)
	}
}

// A binding that already shows a status gets every part written at once:
// failover and graceful eviction read it.
func TestShownBindingWritesAtOnce(t *testing.T) {
	b := newBinding()
	scheduledPart("scheduled to member1(1)")(&b.Status)
	e := newEnv(t, b)
	if err := e.w.Write(e.ctx, b, "binding", appliedPart(false), AgentStage); err != nil {
		t.Fatal(err)
	}
	if n := e.writes(); n != 1 {
		t.Fatalf("%d status writes, want 1", n)
	}
}

// A held part is written when its hold ends: from the first agent-stage
// part, or after maxHoldFactor holds while the hub's own stages last.
func TestHeldPartsAreWrittenWhenTheHoldEnds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stages []Stage
		due    time.Duration
	}{
		{"hub stage only", []Stage{HubStage}, maxHoldFactor * hold},
		{"agents waited for", []Stage{HubStage, AgentStage}, hold},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBinding()
			e := newEnv(t, b)
			for i, stage := range tc.stages {
				author := []string{"scheduler", "binding"}[i]
				part := scheduledPart("scheduled")
				if author == "binding" {
					part = appliedPart(false)
				}
				if err := e.w.Write(e.ctx, b, author, part, stage); err != nil {
					t.Fatal(err)
				}
			}
			// The binding controller has synced since (with nothing to
			// sum, or failing): the hub is not behind (hubbehind_test.go).
			e.w.Summed("ns/app-deployment", e.w.Summing("ns/app-deployment"))
			e.clock.Step(tc.due - time.Second)
			if err := e.w.flushDue(e.ctx, "ns/app-deployment"); err != nil {
				t.Fatal(err)
			}
			if n := e.writes(); n != 0 {
				t.Fatalf("%d writes before the hold ends, want 0", n)
			}
			e.clock.Step(time.Second)
			if err := e.w.flushDue(e.ctx, "ns/app-deployment"); err != nil {
				t.Fatal(err)
			}
			if n := e.writes(); n != 1 {
				t.Fatalf("%d writes when the hold ends, want 1", n)
			}
			if !meta.IsStatusConditionTrue(e.stored(t).Status.Conditions, workv1alpha1.BindingConditionScheduled) {
				t.Fatal("the held Scheduled part was not written")
			}
		})
	}
}

// A failed write keeps every part for the retry, and a later part of an
// author replaces its earlier one.
func TestFailedWriteKeepsThePartsAndLaterPartsReplace(t *testing.T) {
	b := newBinding()
	e := newEnv(t, b)
	if err := e.w.Write(e.ctx, b, "scheduler", scheduledPart("first"), HubStage); err != nil {
		t.Fatal(err)
	}
	fail := true
	e.client.PrependReactor("patch", "resourcebindings", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail {
			return true, nil, errors.New("apiserver unavailable")
		}
		return false, nil, nil
	})
	if err := e.w.Write(e.ctx, b, "binding", appliedPart(true), Settled); err == nil {
		t.Fatal("want the write's error")
	}
	fail = false
	if err := e.w.Write(e.ctx, b, "scheduler", scheduledPart("second"), HubStage); err != nil {
		t.Fatal(err)
	}
	if n := e.writes(); n != 1 {
		t.Fatalf("%d writes (the failed one), want 1 so far", n)
	}
	if err := e.w.Write(e.ctx, b, "binding", appliedPart(true), Settled); err != nil {
		t.Fatal(err)
	}
	got := e.stored(t)
	c := meta.FindStatusCondition(got.Status.Conditions, workv1alpha1.BindingConditionScheduled)
	if c == nil || c.Message != "second" || !meta.IsStatusConditionTrue(got.Status.Conditions, workv1alpha1.BindingConditionFullyApplied) {
		t.Fatalf("stored status = %+v, want Scheduled \"second\" and FullyApplied", got.Status.Conditions)
	}
}

// A binding without a placement (a dependency's) never gets a Scheduled
// condition: its status is written at once.
func TestBindingWithoutPlacementWritesAtOnce(t *testing.T) {
	b := newBinding()
	b.Spec.Placement = nil
	e := newEnv(t, b)
	if err := e.w.Write(e.ctx, b, "binding", appliedPart(false), AgentStage); err != nil {
		t.Fatal(err)
	}
	if n := e.writes(); n != 1 {
		t.Fatalf("%d status writes, want 1", n)
	}
}

// A part for a binding that was deleted and recreated under the same name
// is not written onto the new one.
func TestPartsOfAnotherUIDAreDropped(t *testing.T) {
	b := newBinding()
	e := newEnv(t, b)
	if err := e.w.Write(e.ctx, b, "scheduler", scheduledPart("old"), HubStage); err != nil {
		t.Fatal(err)
	}
	recreated := b.DeepCopy()
	recreated.UID = "u2"
	if v := e.w.View(recreated); meta.FindStatusCondition(v.Status.Conditions, workv1alpha1.BindingConditionScheduled) != nil {
		t.Fatal("the old binding's held part shows on its successor")
	}
}

// A failed write is retried by the writer itself, hold or not: the
// authors read the parts in View and have nothing new to submit.
func TestFailedWriteIsRetriedByTheWriter(t *testing.T) {
	b := newBinding()
	e := newEnv(t, b)
	if err := e.w.Write(e.ctx, b, "scheduler", scheduledPart("placed"), HubStage); err != nil {
		t.Fatal(err)
	}
	fail := true
	e.client.PrependReactor("patch", "resourcebindings", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail {
			return true, nil, errors.New("conflict")
		}
		return false, nil, nil
	})
	if err := e.w.Write(e.ctx, b, "binding", appliedPart(true), Settled); err == nil {
		t.Fatal("want the write's error")
	}
	if e.w.queue.NumRequeues("ns/app-deployment") == 0 {
		t.Fatal("the failed write was not queued for a retry")
	}
	fail = false
	// The queue's retry, before any hold would end.
	if err := e.w.flushDue(e.ctx, "ns/app-deployment"); err != nil {
		t.Fatal(err)
	}
	got := e.stored(t)
	if !meta.IsStatusConditionTrue(got.Status.Conditions, workv1alpha1.BindingConditionScheduled) ||
		!meta.IsStatusConditionTrue(got.Status.Conditions, workv1alpha1.BindingConditionFullyApplied) {
		t.Fatalf("the retry did not write both parts: %+v", got.Status.Conditions)
	}
}
