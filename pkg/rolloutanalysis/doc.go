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

// Package rolloutanalysis runs the Prometheus analyses of staged rollouts
// (a decision group's rolloutStrategy analysis) for the hub's binding
// controller, with the semantics of an Argo Rollouts AnalysisRun.
//
// # Use
//
// The controller builds one Runner (NewRunner), starts its measurement loop
// (go r.Run(ctx)) and, on every sync of a binding whose current group has an
// analysis, calls Observe with a key of its choice (opaque to this package,
// e.g. "ns/name@rev3/canary"), the analysis, the group and its clusters.
// Run is called once per Runner. Observe never touches the network: it
// returns the analysis' current status at once. When a measurement changes
// that status, the Runner calls Options.OnChange(key) from a background
// goroutine so the controller syncs the key again. Forget drops a key's state (binding deleted, group or
// revision changed). Validate checks an analysis as a webhook or the
// controller would: both CEL conditions compile to bool within the cost
// budget, and the query template is well formed.
//
// # Lifecycle of an analysis
//
// The first Observe of a key starts its analysis: the first measurement
// runs as soon as the loop gets to it, then one every spec.Interval
// (default 30s, at least 1s), counted from the end of the previous one. A
// later Observe with a different spec (after defaulting), group or set of
// clusters (order and duplicates do not matter) restarts the analysis: its
// counts are reset and the result of a measurement still in flight is
// discarded. At most MaxAnalyses are kept; past that the least recently
// observed one is dropped (observed again, it starts over).
//
// # A measurement
//
//  1. Every {{clusters}} in spec.Prometheus.Query is replaced by a regular
//     expression that matches exactly the given cluster names:
//     regexp.QuoteMeta of each, sorted, joined by "|" and wrapped in
//     (?:...), e.g. (?:eu\.a|us-b). Inside a PromQL "..." or '...' string
//     the expression is escaped as that string needs (each \ doubled), so
//     cluster=~"{{clusters}}" matches the names exactly; inside a `raw`
//     string it is written as is. Any other {{name}} is an error, as is
//     {{clusters}} outside a string literal. No clusters at all is
//     inconclusive.
//  2. The query runs as an instant query (Prometheus HTTP API, at the
//     server's current time) against Options.Address with Options.Timeout.
//  3. result is the value: a scalar's value, or the first sample of an
//     instant vector, the samples sorted by their label set's string. An
//     empty vector, a range vector (matrix), a string, a native histogram,
//     NaN, ±Inf, a query error, a timeout, an oversized response (over
//     MaxResponseBytes), or an unreachable or unconfigured Prometheus make
//     the measurement Inconclusive, with the reason in the message: never a
//     success.
//  4. SuccessCondition (CEL over the double result, returning bool) true is
//     a success; else FailureCondition, when set, true is a failure; else the
//     measurement is inconclusive. An evaluation error (e.g. the cost limit)
//     is inconclusive too, and so is a spec Validate refuses (its first
//     measurement says why).
//
// # Phases
//
// Running until one of: Successful after spec.Count (default 1) successes;
// Failed when the failures exceed spec.FailureLimit (default 0);
// Inconclusive as soon as one measurement is inconclusive (the rollout
// waits for a person, who accepts it with kubectl flotilla rollout approve;
// the analysis measures no more until Forget or a restart). The three are
// terminal: no further measurements. Message (at most MaxMessageBytes, cut
// on a UTF-8 boundary) says the last measurement's value or error.
//
// # Bounds
//
// Conditions are tenant input: at most MaxConditionLength characters each,
// a bounded parser depth, a static cost estimate and a runtime cost limit
// (CostLimit). At most MaxInFlight queries run at once; a response body
// larger than MaxResponseBytes is refused (the reader stops there), response
// headers are bounded, and the query after substitution is at most
// MaxQueryBytes. The Prometheus address is the hub admin's
// (--rollout-prometheus-address), never the tenant's.
//
// # Metrics
//
// With Options.Registerer, the Runner counts its measurements in
// flotilla_rollout_analysis_measurements_total{result="success|failure|inconclusive"}.
package rolloutanalysis
