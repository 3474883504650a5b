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
		{"hub stages only", time.Time{}, false, first.Add(maxHoldFactor * hold)},
		{"waiting for agents", agents, false, agents.Add(hold)},
		{"reports in, not summed", agents, true, first.Add(maxHoldFactor * hold)},
		{"hub behind before any agent wait", time.Time{}, true, first.Add(maxHoldFactor * hold)},
		{"agents waited for past the bound", first.Add(maxHoldFactor * hold), false, first.Add(maxHoldFactor * hold)},
	} {
		if got := holdEnd(first, tc.agentsAt, hold, tc.hubBehind); !got.Equal(tc.want) {
			t.Errorf("%s: holdEnd = %v, want %v", tc.name, got.Sub(first), tc.want.Sub(first))
		}
	}
}

// A binding waiting for its agents keeps its status held past the agents'
// hold while a change of its Works has not been summed up by the binding
// controller; once the sync that read it succeeds, the hold is as before,
// and never longer than maxHoldFactor holds.
func TestHoldWaitsForTheHubToSumReports(t *testing.T) {
	const key = "ns/app-deployment"
	b := newBinding()
	e := newEnv(t, b)
	e.w.Changed(key) // nothing held yet: not counted
	if err := e.w.Write(e.ctx, b, "scheduler", scheduledPart("scheduled"), HubStage); err != nil {
		t.Fatal(err)
	}
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
		t.Fatalf("%d writes while the report is not summed, want 0", n)
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

func TestHoldForTheHubIsBounded(t *testing.T) {
	const key = "ns/app-deployment"
	b := newBinding()
	e := newEnv(t, b)
	if err := e.w.Write(e.ctx, b, "binding", appliedPart(false), AgentStage); err != nil {
		t.Fatal(err)
	}
	e.w.Changed(key) // never summed: the binding controller keeps failing
	e.clock.Step(maxHoldFactor*hold - time.Second)
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

// A sync that finds the report summed but nothing to settle ends the
// extension: the in-flight status is written as it was due.
func TestSummedWithoutSettlingWritesWhenDue(t *testing.T) {
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
	token := e.w.Summing(key)
	e.w.Summed(key, token)
	if err := e.w.flushDue(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := e.writes(); n != 1 {
		t.Fatalf("%d writes once summed past the agents' hold, want 1", n)
	}
}
