package resourceinterpreter

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// fuzzKinds are the built-in kinds whose counters AggregateStatus sums,
// and one whose load balancers it joins.
var fuzzKinds = []string{"Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job", "Service"}

// slowCall bounds one call under fuzzing (a loaded machine included): the
// code's own limits are far below it (EvalTimeout, the search budget).
const slowCall = 2 * time.Second

// FuzzAggregateStatus: the built-in aggregation of what members report,
// random counters (huge, negative, fractional, strings) from up to 2,000
// clusters and one random status. The sum of a field is never negative,
// never less than any one cluster's valid value (0 to 2^31-1), and is
// exactly the sum of the valid values: nothing wraps. The result is within
// statuslimits.MaxWorkloadStatus, the same twice, and a cluster is left out
// only for a reason.
func FuzzAggregateStatus(f *testing.F) {
	f.Add(uint8(0), int64(3), int64(9007199254740992), 2.5, uint16(1100), []byte(`{"replicas":-1}`))
	f.Add(uint8(1), int64(math.MaxInt64), int64(-5), 1e300, uint16(3), []byte(`{"readyReplicas":"9"}`))
	f.Add(uint8(4), int64(0), int64(math.MaxInt32), math.Copysign(0, -1), uint16(2), []byte(`[1]`))
	f.Add(uint8(5), int64(1), int64(2), 3.0, uint16(5), []byte(`{"loadBalancer":{"ingress":[{"ip":"10.0.0.1"}]}}`))
	f.Fuzz(func(t *testing.T, kindIndex uint8, a, b int64, c float64, n uint16, other []byte) {
		kind := fuzzKinds[int(kindIndex)%len(fuzzKinds)]
		values := []string{strconv.FormatInt(a, 10), strconv.FormatInt(b, 10), `"` + strconv.FormatInt(a, 10) + `"`}
		if !math.IsNaN(c) && !math.IsInf(c, 0) {
			values = append(values, strconv.FormatFloat(c, 'g', -1, 64))
		}
		fields := aggregatedFields[kind]
		statuses := make([]ClusterStatus, 0, int(n%2001)+1)
		for k := range int(n % 2001) {
			parts := make([]string, 0, len(fields))
			for fi, field := range fields {
				parts = append(parts, fmt.Sprintf("%q:%s", field, values[(k+fi)%len(values)]))
			}
			statuses = append(statuses, ClusterStatus{fmt.Sprintf("member%d", k), raw("{" + strings.Join(parts, ",") + "}")})
		}
		statuses = append(statuses, ClusterStatus{"other", raw(string(other))})
		gvk := schema.GroupVersionKind{Kind: kind}
		start := time.Now()
		agg := Default.AggregateStatus(gvk, statuses)
		if d := time.Since(start); d > slowCall {
			t.Fatalf("%d statuses took %v", len(statuses), d)
		}
		if again := Default.AggregateStatus(gvk, statuses); !reflect.DeepEqual(agg, again) {
			t.Fatal("not deterministic")
		}
		if agg.Status != nil && len(agg.Status.Raw) > statuslimits.MaxWorkloadStatus {
			t.Fatalf("aggregate of %d bytes", len(agg.Status.Raw))
		}
		for _, l := range agg.LeftOut {
			if l.Reason == "" {
				t.Fatalf("%s left out without a reason", l.ClusterName)
			}
		}
		if agg.TooLarge != "" || agg.Status == nil {
			return
		}
		var got map[string]any
		if err := json.Unmarshal(agg.Status.Raw, &got); err != nil {
			t.Fatal(err)
		}
		// The valid values of each field, decoded as the hub decodes them,
		// of the statuses within their share.
		share := statuslimits.StatusShare(len(statuses))
		want := map[string]int64{}
		largest := map[string]int64{}
		for _, s := range statuses {
			var m map[string]any
			if len(s.Status.Raw) > share || json.Unmarshal(s.Status.Raw, &m) != nil || len(m) > statuslimits.MaxStatusProperties {
				continue
			}
			for _, field := range fields {
				v, ok := m[field].(float64)
				if !ok || v != math.Trunc(v) || v < 0 || v > math.MaxInt32 {
					continue
				}
				want[field] += int64(v)
				largest[field] = max(largest[field], int64(v))
			}
		}
		for _, field := range fields {
			v, present := got[field]
			n, _ := v.(float64)
			if w, valid := want[field]; valid != present || present && (n < 0 || n < float64(largest[field]) || n != float64(w)) {
				t.Fatalf("%s: %s = %v, want %d (largest single value %d)", kind, field, v, want[field], largest[field])
			}
		}
	})
}

// honestStatus is a healthy cluster's reported status of each shipped kind.
var honestStatus = map[string]string{
	"Rollout":         `{"phase":"Healthy","replicas":3,"updatedReplicas":3,"readyReplicas":3,"availableReplicas":3,"observedGeneration":"2","generation":2}`,
	"CloneSet":        `{"replicas":3,"readyReplicas":3,"availableReplicas":3,"updatedReplicas":3,"updatedReadyReplicas":3,"expectedUpdatedReplicas":3,"observedGeneration":2,"generation":2}`,
	"FlinkDeployment": `{"lifecycleState":"STABLE","jobStatus":{"state":"RUNNING","jobId":"a"},"observedGeneration":2}`,
}

// FuzzStatusAggregationRule: the shipped statusAggregation rules over up
// to 200 honest clusters and one liar, whose status is random bytes or a
// status of random values in the fields the rules read. No panic, bounded
// time, a result within statuslimits.MaxWorkloadStatus, the same twice;
// and the liar leaves out one status at most: its own, unless the statuses
// fail only all together (then the rule cannot tell which of them lies, and
// any one is left out); never the whole aggregate.
func FuzzStatusAggregationRule(f *testing.F) {
	f.Add(uint8(0), uint8(5), uint8(2), []byte(`{"replicas":"9223372036854775807"}`), "Degraded", int64(math.MaxInt64))
	f.Add(uint8(1), uint8(40), uint8(0), []byte(`{"replicas":[1]}`), "x", int64(-1))
	f.Add(uint8(2), uint8(3), uint8(3), []byte(`{"jobStatus":{"state":"RUNNING"}}`), "RUNNING", int64(0))
	f.Add(uint8(0), uint8(200), uint8(100), []byte(`not json`), "99999999999999999999", int64(9007199254740993))
	f.Add(uint8(1), uint8(1), uint8(1), []byte(`{"statusLeftOut":"x"}`), "", int64(1))
	shipped := shippedInterpreter(f)
	gvks := map[string]schema.GroupVersionKind{}
	for _, gvk := range shipped.Kinds() {
		gvks[gvk.Kind] = gvk
	}
	kinds := []string{"Rollout", "CloneSet", "FlinkDeployment"}
	f.Fuzz(func(t *testing.T, kindIndex, honest, pos uint8, liar []byte, str string, num int64) {
		kind := kinds[int(kindIndex)%len(kinds)]
		n := int(honest)%200 + 1
		if !json.Valid(liar) || !strings.HasPrefix(strings.TrimSpace(string(liar)), "{") {
			s, _ := json.Marshal(map[string]any{"phase": str, "replicas": str, "readyReplicas": num, "availableReplicas": float64(num),
				"jobStatus": map[string]any{"state": str}, "updatedReplicas": []any{num}})
			liar = s
		}
		statuses := make([]ClusterStatus, 0, n+1)
		at := int(pos) % (n + 1)
		for k := range n + 1 {
			s := honestStatus[kind]
			name := fmt.Sprintf("member%d", k)
			if k == at {
				s, name = string(liar), "liar"
			}
			statuses = append(statuses, ClusterStatus{name, raw(s)})
		}
		start := time.Now()
		agg := shipped.AggregateStatus(gvks[kind], statuses)
		if d := time.Since(start); d > slowCall {
			t.Fatalf("%d statuses took %v", len(statuses), d)
		}
		if limited(agg) {
			// A loaded machine stopped an evaluation at its time limit:
			// the size of the whole, not the liar's doing (the cost
			// limit is far: the shipped rules cost ~100 per status).
			t.Skipf("an evaluation reached its time limit: %+v", agg)
		}
		if agg.Failed != "" {
			t.Fatalf("one liar blanked the aggregate: %s", agg.Failed)
		}
		// One status left out at most: the liar's, or, when every
		// one removal is enough (a lie that overflows only with two
		// honest counts), any one's.
		if len(agg.LeftOut) > 1 {
			t.Fatalf("one liar left out %d clusters: %+v", len(agg.LeftOut), agg.LeftOut)
		}
		if agg.Status == nil && kind != "FlinkDeployment" {
			t.Fatalf("no aggregate of %d honest clusters", n)
		}
		if agg.Status != nil && len(agg.Status.Raw) > statuslimits.MaxWorkloadStatus {
			t.Fatalf("aggregate of %d bytes", len(agg.Status.Raw))
		}
		if again := shipped.AggregateStatus(gvks[kind], statuses); !reflect.DeepEqual(agg, again) && !limited(again) {
			t.Fatalf("not deterministic: %+v, then %+v", agg, again)
		}
	})
}

// limited: an evaluation of agg was stopped at a limit.
func limited(agg Aggregate) bool {
	if agg.Failed != "" && strings.Contains(agg.Failed, "interrupted") {
		return true
	}
	for _, l := range agg.LeftOut {
		if strings.Contains(l.Reason, "cost or time limit") {
			return true
		}
	}
	return false
}

// FuzzCustomizationEval: random objects through the shipped
// customizations' object rules (healthInterpretation, replicaResource's
// replicas, statusReflection, dependencyInterpretation) and the built-in
// interpreter's health, reflection and dependencies of Kubernetes' kinds.
// No panic, each call in bounded time (the rules' cost and time limits
// hold), a health the API knows, a reflected status within the reported
// status bounds, the same health twice. (replicaResource.podTemplate's
// requests are quantities, fuzzed with them.)
func FuzzCustomizationEval(f *testing.F) {
	f.Add(uint8(0), []byte(`{"metadata":{"name":"web","namespace":"app","generation":2},"spec":{"replicas":3},"status":{"phase":"Healthy","observedGeneration":"2"}}`))
	f.Add(uint8(1), []byte(`{"metadata":{"generation":2},"spec":{"replicas":-1},"status":{"observedGeneration":2,"updatedReplicas":3,"conditions":[{"type":"Failed","status":"True"}]}}`))
	f.Add(uint8(2), []byte(`{"status":{"jobStatus":{"state":"FAILED"},"lifecycleState":"`+strings.Repeat("x", 20000)+`"}}`))
	f.Add(uint8(3), []byte(`{"spec":{"template":{"spec":{"volumes":[{"secret":{"secretName":"s"}}],"containers":[{"envFrom":[{"configMapRef":{"name":"c"}}]}]}}},"status":{"availableReplicas":1e300}}`))
	f.Add(uint8(7), []byte(`{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`))
	shipped := shippedInterpreter(f)
	gvks := append(shipped.Kinds(),
		schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"},
		schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"},
		schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"},
		schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
		schema.GroupVersionKind{Version: "v1", Kind: "Service"},
		schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Generic"})
	f.Fuzz(func(t *testing.T, kindIndex uint8, data []byte) {
		var content map[string]any
		if err := utiljson.Unmarshal(data, &content); err != nil || content == nil {
			return
		}
		obj := &unstructured.Unstructured{Object: content}
		gvk := gvks[int(kindIndex)%len(gvks)]
		obj.SetGroupVersionKind(gvk)
		timed := func(what string, call func()) {
			t.Helper()
			start := time.Now()
			call()
			if d := time.Since(start); d > slowCall {
				t.Fatalf("%s of a %s took %v", what, gvk.Kind, d)
			}
		}
		var health workv1alpha1.ResourceHealth
		timed("health", func() { health = shipped.Health(obj) })
		switch health {
		case workv1alpha1.ResourceHealthy, workv1alpha1.ResourceUnhealthy, workv1alpha1.ResourceUnknown:
		default:
			t.Fatalf("health %q", health)
		}
		if again := shipped.Health(obj); again != health {
			t.Fatalf("health %s, then %s", health, again)
		}
		timed("status reflection", func() {
			if s := shipped.ReflectStatus(obj); s != nil {
				var fields map[string]json.RawMessage
				if len(s.Raw) > statuslimits.MaxReflectedStatus || json.Unmarshal(s.Raw, &fields) != nil || len(fields) > statuslimits.MaxStatusProperties {
					t.Fatalf("reflected status of %d bytes, %d fields", len(s.Raw), len(fields))
				}
			}
		})
		if r := shipped.Rules(gvk); r != nil && r.Replicas != nil {
			timed("replicas", func() {
				if n, err := r.Replicas.EvalInt(obj.Object); err == nil && n < 0 {
					t.Fatalf("replicas %d", n)
				}
			})
		}
		timed("dependencies", func() { _, _ = shipped.GetDependencies(obj) })
	})
}
