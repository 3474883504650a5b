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

package core

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkScheduleAssumed is BenchmarkSchedule as the controller makes
// the decision with overcommit protection: the room lock for decisions by
// room, the ledger's snapshot (20 bindings' placements outstanding over the
// fleet), the decision, the result assumed and confirmed, and the oldest
// binding's assumption released.
func BenchmarkScheduleAssumed(b *testing.B) {
	fleet, specs := benchFleet(), benchSpecs()
	var summaries SummaryVerdicts
	check := summaries.Check
	ledger := NewAssumptions(time.Minute, AssumptionHooks{})
	const outstanding = 20
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		spec := specs[i%len(specs)]
		key := fmt.Sprintf("bench/app-%d", i)
		unlock := func() {}
		if UsesRoom(&spec) {
			unlock = ledger.LockRoom()
		}
		res, err := Schedule(Input{Key: key, Spec: &spec, Clusters: fleet, Now: now, SummaryProblem: check, Assumed: ledger.Snapshot()})
		if err != nil {
			b.Fatal(err)
		}
		ledger.Assume(key, &spec, res.Clusters, now)
		unlock()
		ledger.Confirm(key, 1)
		if i >= outstanding {
			ledger.ForgetBinding(fmt.Sprintf("bench/app-%d", i-outstanding))
		}
		i++
	}
}
