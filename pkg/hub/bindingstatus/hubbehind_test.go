package bindingstatus

import (
	"testing"
	"time"
)

func TestHoldEnd(t *testing.T) {
	first := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	agents := first.Add(time.Minute)
	for _, tc := range []struct {
		name      string
		agentsAt  time.Time
		hubBehind bool
		want      time.Time
	}{
		{"hub stages, controller synced", time.Time{}, false, first.Add(maxHoldFactor * hold)},
		{"waiting for agents", agents, false, agents.Add(hold)},
		{"agents waited for past the hub stages' bound", first.Add(maxHoldFactor * hold), false, first.Add(maxHoldFactor * hold)},
		{"reports in, not synced", agents, true, first.Add(MaxBehindFactor * hold)},
		{"placement not synced", time.Time{}, true, first.Add(MaxBehindFactor * hold)},
	} {
		if got := holdEnd(first, tc.agentsAt, hold, tc.hubBehind); !got.Equal(tc.want) {
			t.Errorf("%s: holdEnd = %v, want %v", tc.name, got.Sub(first), tc.want.Sub(first))
		}
	}
	if MaxBehindFactor <= maxHoldFactor {
		t.Errorf("MaxBehindFactor %d is not above maxHoldFactor %d", MaxBehindFactor, maxHoldFactor)
	}
}

// A binding waiting for its agents keeps its status held past the agents'
// hold while a change of its Works has not been synced by the binding
// controller; once a sync that began after it is over, the hold is as
// before.
func TestHoldWaitsForTheHubToSumReports(t *testing.T) {
	const key = "ns/app-deployment"
	b := newBinding()
	e := newEnv(t, b)
	e.w.Changed(key) // nothing held yet: not kept
	if err := e.w.Write(e.ctx, b, "binding", appliedPart(false), AgentStage); err != nil {
		t.Fatal(err)
	}
	token := e.w.Summing(key)
	e.w.Changed(key) // an agent reports while the binding is queued
	e.clock.Step(hold)
	if err := e.w.flushDue(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := e.writes(); n != 0 {
		t.Fatalf("%d writes while the report is not synced, want 0", n)
	}
	// The sync that started before the report does not count for it.
	e.w.Summed(key, token)
	if err := e.w.flushDue(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := e.writes(); n != 0 {
		t.Fatalf("%d writes after a sync that began before the report, want 0", n)
	}
	// The next sync sums it and the binding settles: one write.
	token = e.w.Summing(key)
	if err := e.w.Write(e.ctx, b, "binding", appliedPart(true), Settled); err != nil {
		t.Fatal(err)
	}
	e.w.Summed(key, token)
	if n := e.writes(); n != 1 {
		t.Fatalf("%d writes once settled, want 1", n)
	}
}

// A first part in the hub's stages (the scheduler's placement) waits for
// the binding controller's next sync, past the hub stages' 8 holds, and
// is written when that sync is over without settling it; never later than
// MaxBehindFactor holds.
func TestHubStageWaitsForTheNextSync(t *testing.T) {
	const key = "ns/app-deployment"
	b := newBinding()
	e := newEnv(t, b)
	before := e.w.Summing(key) // a sync already running
	if err := e.w.Write(e.ctx, b, "scheduler", scheduledPart("scheduled"), HubStage); err != nil {
		t.Fatal(err)
	}
	e.w.Summed(key, before)
	e.clock.Step(maxHoldFactor * hold)
	if err := e.w.flushDue(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := e.writes(); n != 0 {
		t.Fatalf("%d writes while the placement waits in the binding controller's queue, want 0", n)
	}
	// The sync comes (it fails, say): the status is overdue and written.
	e.w.Summed(key, e.w.Summing(key))
	if err := e.w.flushDue(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := e.writes(); n != 1 {
		t.Fatalf("%d writes once synced past the bound, want 1", n)
	}
}

func TestHoldForTheHubIsBounded(t *testing.T) {
	const key = "ns/app-deployment"
	b := newBinding()
	e := newEnv(t, b)
	if err := e.w.Write(e.ctx, b, "binding", appliedPart(false), AgentStage); err != nil {
		t.Fatal(err)
	}
	e.w.Changed(key) // never synced
	e.clock.Step(MaxBehindFactor*hold - time.Second)
	if err := e.w.flushDue(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := e.writes(); n != 0 {
		t.Fatalf("%d writes before the bound, want 0", n)
	}
	e.clock.Step(time.Second)
	if err := e.w.flushDue(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := e.writes(); n != 1 {
		t.Fatalf("%d writes at the bound, want 1", n)
	}
}

// A sync that finds nothing to settle ends the extension: the in-flight
// status is written as it was due.
func TestSyncedWithoutSettlingWritesWhenDue(t *testing.T) {
	const key = "ns/app-deployment"
	b := newBinding()
	e := newEnv(t, b)
	if err := e.w.Write(e.ctx, b, "binding", appliedPart(false), AgentStage); err != nil {
		t.Fatal(err)
	}
	e.w.Changed(key)
	e.clock.Step(hold)
	if err := e.w.flushDue(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	e.w.Summed(key, e.w.Summing(key))
	if err := e.w.flushDue(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := e.writes(); n != 1 {
		t.Fatalf("%d writes once synced past the agents' hold, want 1", n)
	}
}
