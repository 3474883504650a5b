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

package resourceinterpreter

import (
	"encoding/json"
	"errors"
	"sort"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter/customization"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// ClusterStatus is one cluster's reported status of a workload.
type ClusterStatus struct {
	ClusterName string
	Status      *runtime.RawExtension
}

// Aggregate is a workload's status aggregated over its clusters (a
// template's status.workloadStatus), and what of the clusters' statuses is
// not in it. The clusters' statuses are untrusted (a member may lie): what
// one of them reports can leave its own status out, never the others'.
type Aggregate struct {
	// Status is the aggregated status, nil when there is none: at most
	// statuslimits.MaxWorkloadStatus bytes, else the statuslimits.LeftOut
	// stand-in (TooLarge says so).
	Status *runtime.RawExtension
	// LeftOut are the clusters whose reported status is not (or not
	// wholly) in Status, in the order given, with why.
	LeftOut []LeftOutStatus
	// Failed is why there is no aggregate at all though clusters reported:
	// the statusAggregation rule failed over them together (its cost or
	// time limit) and no subset of them could be found to succeed; "" when
	// it did not.
	Failed string
	// TooLarge is the note when the aggregate was larger than
	// statuslimits.MaxWorkloadStatus and Status is the stand-in; "" when
	// it was not.
	TooLarge string
}

// LeftOutStatus is a cluster whose reported status is left out of an
// Aggregate, and why.
type LeftOutStatus struct {
	ClusterName string
	Reason      string
}

// maxLeftOutReason bounds one cluster's reason (a CEL error can quote a
// reported value).
const maxLeftOutReason = 256

// AggregateStatus aggregates the clusters' reported statuses of a workload
// of kind gvk: with the customization's statusAggregation, else the
// built-in aggregation (AggregateStatus). Each cluster's status is first
// bounded as the binding bounds it (statuslimits.StatusShare of
// len(statuses), statuslimits.MaxStatusProperties fields); one that is not
// a JSON object within them, or that is the stand-in of a status the hub
// left out, is left out here too. A rule that fails over the statuses is
// evaluated again without the clusters it fails on (aggregationSearch);
// the result is bounded by statuslimits.WorkloadStatus. No status at all
// gives an empty Aggregate.
func (i *Interpreter) AggregateStatus(gvk schema.GroupVersionKind, statuses []ClusterStatus) Aggregate {
	var agg Aggregate
	var leftOut map[int]string // allocated for the first status left out
	leaveOut := func(k int, reason string) {
		if leftOut == nil {
			leftOut = map[int]string{}
		}
		leftOut[k] = reason
	}
	share := statuslimits.StatusShare(len(statuses))
	type entry struct {
		index  int
		status map[string]any
	}
	entries := make([]entry, 0, len(statuses))
	for k, s := range statuses {
		if s.Status == nil || len(s.Status.Raw) == 0 {
			continue
		}
		// The size first, then one decoding: statuslimits.StatusLeftOut
		// (which decodes again) only names what is wrong.
		var m map[string]any
		if len(s.Status.Raw) > share || json.Unmarshal(s.Status.Raw, &m) != nil || m == nil || len(m) > statuslimits.MaxStatusProperties {
			if note := statuslimits.StatusLeftOut(s.Status, share); note != "" {
				leaveOut(k, note)
			}
			continue
		}
		if note := statuslimits.LeftOutNote(m); note != "" {
			leaveOut(k, note)
			continue
		}
		entries = append(entries, entry{k, m})
	}
	var raw *runtime.RawExtension
	if r := i.Rules(gvk); r != nil && r.StatusAggregation != nil {
		if len(entries) > 0 {
			list := make([]any, len(entries))
			for n, e := range entries {
				list[n] = map[string]any{"clusterName": statuses[e.index].ClusterName, "status": normalizeNumbers(e.status)}
			}
			s := aggregationSearch{rule: r.StatusAggregation, statuses: list}
			out, dropped, failed := s.run()
			for n, reason := range dropped {
				leaveOut(entries[n].index, reason)
			}
			agg.Failed = failed
			if len(out) > 0 {
				if b, err := json.Marshal(out); err == nil {
					raw = &runtime.RawExtension{Raw: b}
				}
			}
		}
	} else {
		maps := make([]map[string]any, len(entries))
		for n, e := range entries {
			maps[n] = e.status
		}
		var invalid map[int]string
		raw, invalid, _ = aggregateBuiltIn(gvk.Kind, maps)
		for n, reason := range invalid {
			leaveOut(entries[n].index, reason)
		}
	}
	agg.Status, agg.TooLarge = statuslimits.WorkloadStatus(raw)
	indexes := make([]int, 0, len(leftOut))
	for k := range leftOut {
		indexes = append(indexes, k)
	}
	sort.Ints(indexes)
	for _, k := range indexes {
		agg.LeftOut = append(agg.LeftOut, LeftOutStatus{ClusterName: statuses[k].ClusterName,
			Reason: statuslimits.Text(leftOut[k], maxLeftOutReason)})
	}
	return agg
}

// normalizeNumbers turns the float64s of encoding/json into int64 where
// they are integers, as an informer decodes objects, so that CEL sees
// ints (`s.status.replicas + 1` would not type-check against a double).
func normalizeNumbers(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = normalizeNumbers(e)
		}
		return t
	case []any:
		for k, e := range t {
			t[k] = normalizeNumbers(e)
		}
		return t
	case float64:
		if n, ok := asInt64(t); ok {
			return n
		}
		return t
	default:
		return v
	}
}

// searchBudget bounds what aggregationSearch evaluates, in evaluations of
// every status: the statuses of all its evaluations together are at most
// searchBudget times len(statuses). Finding one cluster the rule fails on
// takes about 3 (halving: n/2 + n/4 + … statuses, then the others once),
// one whose status fails only with the others' (a sum that overflows) about
// 5: 16 finds several, and keeps a failing rule over 1,000 clusters within
// 16 evaluations' time, not the n² of evaluating it without each cluster in
// turn.
const searchBudget = 16

// aggregationSearch evaluates a statusAggregation rule over the clusters'
// statuses and, when it fails, finds clusters to leave out for it to
// succeed over the others, so that one cluster's status (a field missing,
// a value int() refuses, a count that overflows the sum) never blanks the
// aggregate of the rest. Statuses keep their order in every evaluation.
//
// A failing set is halved until a half fails alone (narrow): a single
// status the rule fails on is left out. A set whose halves both succeed
// fails only as a whole (the sum of a lying 2^63-1 and an honest 3): the
// status whose removal alone lets all the others succeed is found by
// halving that set (single) and left out, whatever its position; when no
// one removal is enough, its statuses are added back, by halves, to the
// others that succeed (resolve), leaving out each that makes the rule fail
// among them. An evaluation stopped at the rule's cost or time limit
// stops the search (that is the size of the whole, not one cluster's
// value), as does the budget; the largest set that succeeded is then the
// aggregate, and the clusters not in it are left out unchecked.
type aggregationSearch struct {
	rule     *customization.Expression
	statuses []any

	spent   int
	ok      map[string]map[string]any // results of the sets that succeeded, by setKey
	best    []int                     // the largest set that succeeded
	dropped map[int]string            // left out: index into statuses → why
	stopped string                    // why the search stopped early; "" while it has not
}

// run returns the aggregate, the reasons of the statuses left out (by
// index into statuses), and why there is no aggregate when no set of the
// statuses succeeded.
func (s *aggregationSearch) run() (map[string]any, map[int]string, string) {
	out, err := s.rule.EvalAggregation(s.statuses)
	if err == nil {
		return out, nil, ""
	}
	if customization.IsLimit(err) {
		return nil, nil, ruleError(err)
	}
	s.ok, s.dropped = map[string]map[string]any{}, map[int]string{}
	all := make([]int, len(s.statuses))
	for k := range all {
		all[k] = k
	}
	kept := s.solve(all, ruleError(err))
	if s.stopped != "" {
		// The largest set that succeeded is the aggregate, whatever was
		// found of its clusters before the search stopped.
		kept = s.best
		for _, k := range kept {
			delete(s.dropped, k)
		}
	}
	keptSet := map[int]bool{}
	for _, k := range kept {
		keptSet[k] = true
	}
	for k := range s.statuses {
		if _, ok := s.dropped[k]; !ok && !keptSet[k] {
			s.dropped[k] = "not checked: " + s.stopped
		}
	}
	if len(kept) == 0 {
		if s.stopped != "" {
			return nil, s.dropped, ruleError(err)
		}
		return nil, s.dropped, ""
	}
	// Every set solve returns, and best, succeeded in an evaluation.
	return s.ok[setKey(kept)], s.dropped, ""
}

// ruleError is why an evaluation failed, without the rule's field (the
// condition that shows it names the rule).
func ruleError(err error) string {
	var ee *customization.EvalError
	if errors.As(err, &ee) {
		return ee.Err.Error()
	}
	return err.Error()
}

// eval evaluates the rule over the statuses of set: whether it succeeded
// and, if not, why. It is false without evaluating once the search has
// stopped.
func (s *aggregationSearch) eval(set []int) (bool, string) {
	if s.stopped != "" {
		return false, ""
	}
	if len(set) == 0 {
		return true, ""
	}
	if s.spent+len(set) > searchBudget*len(s.statuses) {
		s.stopped = "the search for the statuses the aggregation rule fails on reached its budget"
		return false, ""
	}
	s.spent += len(set)
	list := make([]any, len(set))
	for n, k := range set {
		list[n] = s.statuses[k]
	}
	out, err := s.rule.EvalAggregation(list)
	if err != nil {
		if customization.IsLimit(err) {
			s.stopped = "the aggregation rule reached its cost or time limit: " + ruleError(err)
			return false, ""
		}
		return false, ruleError(err)
	}
	s.ok[setKey(set)] = out
	if len(set) > len(s.best) {
		s.best = set
	}
	return true, ""
}

// solve returns the statuses of set, which fails with why, the rule
// succeeds over, leaving the others out.
func (s *aggregationSearch) solve(set []int, why string) []int {
	culprit, why := s.narrow(set, why)
	if s.stopped != "" {
		return nil
	}
	rest := without(set, culprit)
	if len(culprit) == 1 {
		s.dropped[culprit[0]] = "the aggregation rule fails on its status: " + why
		culprit = nil
	}
	restOK, whyRest := s.eval(rest)
	if s.stopped != "" {
		return nil
	}
	if len(culprit) > 1 && restOK {
		// The culprit set succeeds by halves but not whole. Leave out
		// one status if that is enough for all the others (a lie near
		// 2^63 that overflows only with the honest counts): that is
		// the liar, unless the statuses fail only all together, and
		// then any one of them does.
		if k, found := s.single(set, culprit); found {
			s.dropped[k] = "the aggregation rule fails with its status among the other clusters': " + why
			return without(set, []int{k})
		}
		if s.stopped != "" {
			return nil
		}
	}
	base := rest
	if !restOK {
		base = s.solve(rest, whyRest)
		if s.stopped != "" {
			return nil
		}
	}
	if len(culprit) == 0 {
		return base
	}
	// Add the culprit set back to the rest that succeeds, leaving out
	// what fails among them. When nothing of rest was left out, base
	// and culprit together are set, known to fail.
	return union(base, s.resolve(base, culprit, len(base) == len(rest), why))
}

// single finds one status of part (over whose removal from set, known, the
// rule succeeds) whose removal alone is enough, halving part: false when
// none is (or the search stopped).
func (s *aggregationSearch) single(set, part []int) (int, bool) {
	if len(part) == 1 {
		return part[0], true
	}
	half := len(part) / 2
	for _, p := range [][]int{part[:half], part[half:]} {
		ok, _ := s.eval(without(set, p))
		if s.stopped != "" {
			return 0, false
		}
		if !ok {
			continue
		}
		if k, found := s.single(set, p); found || s.stopped != "" {
			return k, found
		}
	}
	return 0, false
}

// narrow halves set, which fails with why, down to a single status the
// rule fails on, or to a set whose halves both succeed.
func (s *aggregationSearch) narrow(set []int, why string) ([]int, string) {
	for len(set) > 1 {
		half := len(set) / 2
		if ok, w := s.eval(set[:half]); s.stopped != "" {
			return nil, ""
		} else if !ok {
			set, why = set[:half], w
			continue
		}
		if ok, w := s.eval(set[half:]); s.stopped != "" {
			return nil, ""
		} else if !ok {
			set, why = set[half:], w
			continue
		}
		break
	}
	return set, why
}

// resolve returns the statuses of set the rule succeeds over together with
// base (over which it succeeds), leaving out each that makes it fail.
// knownFail: base and set together are known to fail, with why.
func (s *aggregationSearch) resolve(base, set []int, knownFail bool, why string) []int {
	if !knownFail {
		ok, w := s.eval(union(base, set))
		if s.stopped != "" {
			return nil
		}
		if ok {
			return set
		}
		why = w
	}
	if len(set) == 1 {
		s.dropped[set[0]] = "the aggregation rule fails with its status among the other clusters': " + why
		return nil
	}
	half := len(set) / 2
	first, second := set[:half], set[half:]
	ok, w := s.eval(union(base, second))
	if s.stopped != "" {
		return nil
	}
	if ok {
		return union(second, s.resolve(union(base, second), first, true, why))
	}
	kept := s.resolve(base, first, false, w)
	if s.stopped != "" {
		return nil
	}
	// base with all of first and second is the set known to fail.
	return union(kept, s.resolve(union(base, kept), second, len(kept) == len(first), why))
}

// setKey names a set of indexes for the results of the sets evaluated.
func setKey(set []int) string {
	b := make([]byte, 0, 4*len(set))
	for _, k := range set {
		b = append(b, byte(k>>24), byte(k>>16), byte(k>>8), byte(k))
	}
	return string(b)
}

// union merges two sorted sets of indexes.
func union(a, b []int) []int {
	out := make([]int, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0] < b[0] {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// without is set less the sorted indexes of drop.
func without(set, drop []int) []int {
	out := make([]int, 0, len(set))
	for _, k := range set {
		if len(drop) > 0 && drop[0] == k {
			drop = drop[1:]
			continue
		}
		out = append(out, k)
	}
	return out
}
