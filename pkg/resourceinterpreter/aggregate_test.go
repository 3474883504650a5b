package resourceinterpreter

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

var widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

// aggregationInterpreter is an Interpreter whose Widgets aggregate with
// rule.
func aggregationInterpreter(t testing.TB, rule string) *Interpreter {
	t.Helper()
	i := New()
	i.Set(&configv1alpha1.ResourceInterpreterCustomization{ObjectMeta: metav1.ObjectMeta{Name: "widgets"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target:         configv1alpha1.CustomizationTarget{APIVersion: "example.com/v1", Kind: "Widget"},
			Customizations: configv1alpha1.CustomizationRules{StatusAggregation: &configv1alpha1.StatusAggregation{Expression: rule}}}})
	if r := i.Rules(widgetGVK); r == nil || r.StatusAggregation == nil {
		t.Fatalf("%s does not compile", rule)
	}
	return i
}

func raw(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }

// clusterStatuses names statuses member0, member1…
func clusterStatuses(statuses ...string) []ClusterStatus {
	out := make([]ClusterStatus, len(statuses))
	for k, s := range statuses {
		out[k] = ClusterStatus{ClusterName: fmt.Sprintf("member%d", k), Status: raw(s)}
	}
	return out
}

func decodeStatus(t testing.TB, r *runtime.RawExtension) map[string]any {
	t.Helper()
	if r == nil {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(r.Raw, &m); err != nil {
		t.Fatalf("aggregate %s: %v", r.Raw, err)
	}
	return m
}

func leftOutNames(agg Aggregate) []string {
	var out []string
	for _, l := range agg.LeftOut {
		out = append(out, l.ClusterName)
	}
	return out
}

// A member's counter is not summed when it is not one a controller could
// have written (0 to 2^31-1): 1,100 members reporting 2^53 wrapped the
// int64 sum to a negative number, and one reporting -1000 lowered the
// others' sum, before.
func TestAggregateStatusCountersNeverWrap(t *testing.T) {
	var huge []*runtime.RawExtension
	for range 1100 {
		huge = append(huge, raw(`{"readyReplicas":9007199254740992,"replicas":3}`))
	}
	for name, statuses := range map[string][]*runtime.RawExtension{
		"2^53 from 1,100 members": append(huge, raw(`{"readyReplicas":3}`)),
		"a negative count":        {raw(`{"readyReplicas":-1000}`), raw(`{"readyReplicas":3}`)},
		"a string and a fraction": {raw(`{"readyReplicas":"9"}`), raw(`{"readyReplicas":2.5}`), raw(`{"readyReplicas":3}`)},
	} {
		agg, err := AggregateStatus("Deployment", statuses)
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ ReadyReplicas int64 }
		if err := json.Unmarshal(agg.Raw, &got); err != nil {
			t.Fatal(err)
		}
		if got.ReadyReplicas != 3 {
			t.Errorf("%s: readyReplicas = %d, want 3 (the valid count only)", name, got.ReadyReplicas)
		}
	}
}

// The Interpreter names the member whose counter was not summed.
func TestInterpreterAggregateStatusNamesInvalidCounters(t *testing.T) {
	agg := Default.AggregateStatus(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		clusterStatuses(`{"replicas":2,"readyReplicas":2}`, `{"replicas":-5,"readyReplicas":1e12}`, `{"replicas":3,"readyReplicas":3}`))
	if got := decodeStatus(t, agg.Status); got["replicas"] != 5.0 || got["readyReplicas"] != 5.0 {
		t.Errorf("aggregate = %v, want 5 replicas, 5 ready", got)
	}
	if len(agg.LeftOut) != 1 || agg.LeftOut[0].ClusterName != "member1" ||
		agg.LeftOut[0].Reason != "status.replicas: -5 is not a counter (0 to 2147483647) (and 1 more fields)" {
		t.Errorf("left out = %+v", agg.LeftOut)
	}
	if agg.Failed != "" || agg.TooLarge != "" {
		t.Errorf("aggregate %+v", agg)
	}
}

// One member's status that a statusAggregation rule fails on leaves out
// that member's status, never the others': before, the whole aggregate was
// blank. Whatever the liar's position, and whether the rule fails on its
// status alone (int() of a string out of range, a missing field) or only
// with the others' (a sum that overflows).
func TestAggregationRuleLeavesOutOnlyTheFailingCluster(t *testing.T) {
	shipped := shippedInterpreter(t)
	sumRule := aggregationInterpreter(t, `{"replicas": statuses.map(s, s.status.replicas).sum()}`)
	honest := `{"phase":"Healthy","replicas":3,"availableReplicas":3}`
	for _, tc := range []struct {
		name string
		in   *Interpreter
		gvk  schema.GroupVersionKind
		liar string
	}{
		{"shipped Rollout rule, int() of a number out of range", shipped, shippedRolloutGVK, `{"replicas":"99999999999999999999"}`},
		{"shipped Rollout rule, a sum that overflows", shipped, shippedRolloutGVK, `{"phase":"Healthy","replicas":"9223372036854775807"}`},
		{"shipped Rollout rule, int() of a list", shipped, shippedRolloutGVK, `{"phase":"Healthy","replicas":[1]}`},
		{"a rule that reads a field the status lacks", sumRule, widgetGVK, `{"phase":"Healthy"}`},
		{"a rule that sums a string", sumRule, widgetGVK, `{"replicas":"3"}`},
	} {
		for _, pos := range []int{0, 2, 4} {
			statuses := make([]string, 5)
			for k := range statuses {
				statuses[k] = honest
			}
			statuses[pos] = tc.liar
			agg := tc.in.AggregateStatus(tc.gvk, clusterStatuses(statuses...))
			got := decodeStatus(t, agg.Status)
			if got["replicas"] != 12.0 {
				t.Errorf("%s, liar at %d: aggregate %v, want the four others' 12 replicas", tc.name, pos, got)
			}
			if names := leftOutNames(agg); len(names) != 1 || names[0] != fmt.Sprintf("member%d", pos) {
				t.Errorf("%s, liar at %d: left out %+v, want member%d", tc.name, pos, agg.LeftOut, pos)
			}
			if agg.Failed != "" {
				t.Errorf("%s: failed %q", tc.name, agg.Failed)
			}
		}
	}
}

// Several liars, each leaving out its own status only.
func TestAggregationRuleLeavesOutEachFailingCluster(t *testing.T) {
	in := shippedInterpreter(t)
	statuses := make([]string, 40)
	for k := range statuses {
		statuses[k] = `{"phase":"Healthy","replicas":1}`
	}
	liars := map[int]string{3: `{"replicas":"x"}`, 17: `{"replicas":"5000000000000000000"}`,
		30: `{"replicas":"5000000000000000000"}`, 39: `{"replicas":{"n":1}}`}
	for k, s := range liars {
		statuses[k] = s
	}
	agg := in.AggregateStatus(shippedRolloutGVK, clusterStatuses(statuses...))
	got := decodeStatus(t, agg.Status)
	// The two 5e18 overflow only together: one of them is left out.
	want := 36.0 + 5e18
	if got["replicas"] != want {
		t.Errorf("aggregate %v, want %v replicas", got, want)
	}
	names := leftOutNames(agg)
	if len(names) != 3 || names[0] != "member3" || names[2] != "member39" || names[1] != "member17" && names[1] != "member30" {
		t.Errorf("left out %+v", agg.LeftOut)
	}
}

// The search is bounded: over 1,000 statuses it evaluates at most
// searchBudget times the statuses, whether it finds one liar among honest
// members or the rule fails on every status; what it did not get to is
// named, not silently dropped.
func TestAggregationSearchIsBounded(t *testing.T) {
	statuses := func(liar int, s string) []any {
		out := make([]any, 1000)
		for k := range out {
			st := map[string]any{"replicas": int64(1)}
			if k == liar {
				st = map[string]any{"replicas": s}
			}
			out[k] = map[string]any{"clusterName": fmt.Sprintf("member%d", k), "status": st}
		}
		return out
	}
	sum := aggregationInterpreter(t, `{"replicas": statuses.map(s, int(s.status.replicas)).sum()}`).Rules(widgetGVK).StatusAggregation
	list := aggregationInterpreter(t, `{"replicas": statuses.map(s, int(s.status.replicas)).sum() / 0}`).Rules(widgetGVK).StatusAggregation
	for _, tc := range []struct {
		name     string
		search   aggregationSearch
		wantKept int
	}{
		{"one liar, alone", aggregationSearch{rule: sum, statuses: statuses(700, "x")}, 999},
		{"one liar, with the others", aggregationSearch{rule: sum, statuses: statuses(0, "9223372036854775807")}, 999},
		{"a rule that always fails", aggregationSearch{rule: list, statuses: statuses(-1, "")}, 0},
	} {
		start := time.Now()
		var out map[string]any
		var dropped map[int]string
		var failed string
		// A machine loaded many times over can stop an evaluation at its
		// time limit, which ends the search early: try again then.
		for try := 0; try < 5; try++ {
			tc.search = aggregationSearch{rule: tc.search.rule, statuses: tc.search.statuses}
			if out, dropped, failed = tc.search.run(); !strings.Contains(tc.search.stopped, "time limit") {
				break
			}
		}
		if (tc.wantKept == 0) != (failed != "") {
			t.Errorf("%s: failed %q", tc.name, failed)
		}
		if tc.search.spent > searchBudget*1000 {
			t.Errorf("%s: evaluated %d statuses, over %d", tc.name, tc.search.spent, searchBudget*1000)
		}
		if kept := 1000 - len(dropped); kept != tc.wantKept {
			t.Errorf("%s: kept %d, want %d", tc.name, kept, tc.wantKept)
		}
		if tc.wantKept > 0 && out["replicas"] != int64(tc.wantKept) {
			t.Errorf("%s: aggregate %v", tc.name, out)
		}
		t.Logf("%s: %d statuses evaluated, %v", tc.name, tc.search.spent, time.Since(start))
	}
}

// The shipped Rollout rule aggregates 1,000 clusters: the time limit of an
// aggregation grows with the statuses it folds (before, it stopped at 10 ms,
// about 600 clusters on an idle machine, fewer under load).
func TestShippedAggregationOverAThousandClusters(t *testing.T) {
	in := shippedInterpreter(t)
	agg := in.AggregateStatus(shippedRolloutGVK, rolloutStatuses(1000))
	if limited(agg) {
		// 40 times the time it takes idle; a machine loaded beyond
		// that gets a second chance.
		agg = in.AggregateStatus(shippedRolloutGVK, rolloutStatuses(1000))
	}
	if got := decodeStatus(t, agg.Status); got["replicas"] != 3000.0 || agg.Failed != "" || len(agg.LeftOut) > 0 {
		t.Fatalf("aggregate %v, %+v", got, agg)
	}
}

// An aggregate larger than statuslimits.MaxWorkloadStatus is replaced by a
// stand-in that says so: two nested maps over a dozen 15 KiB statuses build
// 2 MiB within the cost limit, more than etcd stores, and the template's
// status write failed on every sync before.
func TestAggregateStatusIsBounded(t *testing.T) {
	in := aggregationInterpreter(t, `{"x": statuses.map(s, statuses.map(t, t.status.blob))}`)
	blob := `{"blob":"` + strings.Repeat("x", 15000) + `"}`
	var statuses []string
	for range 12 {
		statuses = append(statuses, blob)
	}
	agg := in.AggregateStatus(widgetGVK, clusterStatuses(statuses...))
	if agg.Status == nil || len(agg.Status.Raw) > statuslimits.MaxWorkloadStatus {
		t.Fatalf("aggregate of %d bytes, over %d", len(agg.Status.Raw), statuslimits.MaxWorkloadStatus)
	}
	if got := decodeStatus(t, agg.Status); got[statuslimits.LeftOutField] != agg.TooLarge || !strings.Contains(agg.TooLarge, "over the limit") {
		t.Errorf("aggregate %s, too large %q", agg.Status.Raw, agg.TooLarge)
	}
	// The built-in aggregation is bounded as well: 10,000 Services' load
	// balancers.
	var lbs []ClusterStatus
	for k := range 10000 {
		lbs = append(lbs, ClusterStatus{fmt.Sprint(k), raw(`{"loadBalancer":{"ingress":[{"hostname":"a-long-load-balancer-name.elb.example.com"}]}}`)})
	}
	agg = Default.AggregateStatus(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, lbs)
	if agg.Status == nil || len(agg.Status.Raw) > statuslimits.MaxWorkloadStatus || agg.TooLarge == "" {
		t.Errorf("Services: aggregate of %d bytes, too large %q", len(agg.Status.Raw), agg.TooLarge)
	}
}

// What goes in is bounded as the binding bounds it: a cluster's status
// over its share of statuslimits.AggregatedStatusBudget, or with more
// fields than statuslimits.MaxStatusProperties, or the stand-in of a status
// the hub left out, is left out and named, and the others are aggregated.
func TestAggregateStatusBoundsEachClustersStatus(t *testing.T) {
	var fields []string
	for k := range statuslimits.MaxStatusProperties + 1 {
		fields = append(fields, fmt.Sprintf(`"f%d":1`, k))
	}
	statuses := clusterStatuses(
		`{"replicas":1}`,
		`{"replicas":1,"blob":"`+strings.Repeat("x", statuslimits.MaxReflectedStatus)+`"}`,
		`{"replicas":1,`+strings.Join(fields, ",")+`}`,
		string(statuslimits.LeftOut("reported status left out: 20000 bytes, over the limit of 16384 bytes").Raw),
		`[1]`,
		`{"replicas":2}`,
	)
	for name, in := range map[string]*Interpreter{
		"rule":     aggregationInterpreter(t, `{"replicas": statuses.map(s, s.status.replicas).sum()}`),
		"built-in": nil,
	} {
		gvk := widgetGVK
		if in == nil {
			gvk = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}
		}
		agg := in.AggregateStatus(gvk, statuses)
		if got := decodeStatus(t, agg.Status); got["replicas"] != 3.0 {
			t.Errorf("%s: aggregate %v, want 3 replicas", name, got)
		}
		want := []string{"member1", "member2", "member3", "member4"}
		if got := leftOutNames(agg); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: left out %+v, want %v", name, agg.LeftOut, want)
		}
		for _, l := range agg.LeftOut {
			if l.Reason == "" {
				t.Errorf("%s: %s left out without a reason", name, l.ClusterName)
			}
		}
	}
}

// A lie near 2^63 that overflows the sum only with two or more honest
// counts (found by FuzzStatusAggregationRule, testdata/fuzz/
// FuzzStatusAggregationRule/31c1beb1d84f8ba0): one status is left out, the
// liar's whenever leaving it out alone is enough. When any one removal is
// enough (the liar with two honest counts), the rule cannot tell which of
// them lies; one of them is left out.
func TestAggregationRuleLeavesOutOneStatusForOneLiar(t *testing.T) {
	in := shippedInterpreter(t)
	h, liar := `{"phase":"Healthy","replicas":3}`, `{"phase":"Healthy","replicas":"9223372036854775802"}`
	for _, tc := range []struct {
		statuses []string
		want     string // the cluster left out; "" when any one may be
	}{
		{[]string{h, liar, h}, ""},
		{[]string{h, h, liar, h}, "member2"},
		{[]string{liar, h, h, h, h}, "member0"},
		{[]string{h, h, h, h, h, h, liar, h}, "member6"},
	} {
		agg := in.AggregateStatus(shippedRolloutGVK, clusterStatuses(tc.statuses...))
		if len(agg.LeftOut) != 1 || tc.want != "" && agg.LeftOut[0].ClusterName != tc.want || agg.Status == nil {
			t.Errorf("%d statuses: left out %+v, want %q only", len(tc.statuses), agg.LeftOut, tc.want)
		}
	}
}
