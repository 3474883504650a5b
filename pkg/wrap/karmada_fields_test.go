package wrap

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

func toJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// wrapOne converts one Karmada document and returns the result and the
// first output object decoded strictly.
func wrapOne(t *testing.T, doc string) (*Result, any) {
	t.Helper()
	res, err := Wrap([]Input{{Name: "in", Data: []byte(doc)}}, Options{FromKarmada: true})
	if err != nil {
		t.Fatal(err)
	}
	out, err := res.YAML()
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeStream(t, out)
	if len(objs) == 0 {
		return res, nil
	}
	return res, objs[0]
}

// The notes of the issue-18 conversions say what was rewritten and where
// Flotilla behaves differently from Karmada with the same YAML.
func TestKarmadaIssue18Notes(t *testing.T) {
	for _, c := range []struct {
		file  string
		notes []string
	}{
		{"002-application-failover.yaml", []string{
			"PropagationPolicy seeds/nginx-propagation: spec.failover.application.decisionConditions.healthyState [Unhealthy] dropped: Flotilla fails over an Unhealthy application, as asked"}},
		{"issue18-karmada-v1.12.yaml", []string{
			"ClusterPropagationPolicy flink-jobs: spec.association (deprecated in Karmada) became spec.propagateDeps",
			"ClusterPropagationPolicy flink-jobs: spec.failover.application.purgeMode: Immediately (Karmada before v1.19) written as Directly",
			"ClusterPropagationPolicy flink-jobs: spec.failover.cluster.purgeMode: Graciously (Karmada before v1.19) written as Gracefully",
			"PropagationPolicy shop/checkout: spec.failover.application.purgeMode: Graciously (Karmada before v1.19) written as Gracefully"}},
		{"issue18-propagate-deps.yaml", []string{
			"Deployment shop/web needs Secret web-db (propagateDeps of PropagationPolicy shop/web), which is not in the input: " +
				"the hub propagates a dependency only from a ResourceTemplate of namespace shop, so wrap it too"}},
		{"issue18-workloadrebalancer.yaml", []string{
			"WorkloadRebalancer demo: spec.workloads[2]: ConfigMap demo-config names no namespace, which means cluster-scoped; " +
				"it will fail with ReferencedBindingNotFound, as in Karmada"}},
		{"issue31-preemption.yaml", []string{
			"PropagationPolicy default/nginx-high: spec.preemption: Always takes effect in Flotilla, where Karmada honours it only with " +
				"karmada-controller-manager's feature gate PropagationPolicyPreemption",
			"ClusterPropagationPolicy web-tier: spec.preemption: Always preempts nothing: no resourceSelector names an object"}},
		{"unsupported.yaml", []string{
			"PropagationPolicy default/nginx: spec.failover.application.statePreservation: Karmada injects the state only with purgeMode Directly " +
				"and one target cluster; Flotilla carries it with any purge mode and to every new cluster"}},
	} {
		t.Run(c.file, func(t *testing.T) {
			res, _ := convertFile(t, c.file, Options{Namespace: "seeds"})
			notes := strings.Join(res.Notes, "\n")
			for _, want := range c.notes {
				if !strings.Contains(notes, want) {
					t.Errorf("notes lack %q:\n%s", want, notes)
				}
			}
			// Only the missing Secret is noted: the ConfigMap, the
			// ServiceAccount and the claim are in the input.
			if n := strings.Count(notes, "which is not in the input"); c.file == "issue18-propagate-deps.yaml" && n != 1 {
				t.Errorf("%d missing-dependency notes:\n%s", n, notes)
			}
		})
	}
}

// Karmada spelled the purge modes Immediately and Graciously until v1.19
// (deprecated in v1.15) and Directly and Gracefully since; every spelling
// converts, to the name Flotilla's NormalizePurgeMode gives it, on the
// application and the cluster failover alike.
func TestKarmadaPurgeModes(t *testing.T) {
	for _, c := range []struct {
		in, want string
		noted    bool
	}{
		{"Immediately", "Directly", true},
		{"Graciously", "Gracefully", true},
		{"Directly", "Directly", false},
		{"Gracefully", "Gracefully", false},
		{"Never", "Never", false},
	} {
		for _, which := range []string{"application", "cluster"} {
			t.Run(c.in+"/"+which, func(t *testing.T) {
				doc := fmt.Sprintf("apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p}\n"+
					"spec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  failover:\n    %s: {purgeMode: %s}\n", which, c.in)
				res, obj := wrapOne(t, doc)
				f := obj.(*policyv1alpha1.PropagationPolicy).Spec.Failover
				var got policyv1alpha1.PurgeMode
				if which == "application" {
					got = f.Application.PurgeMode
				} else {
					got = f.Cluster.PurgeMode
				}
				if string(got) != c.want || policyv1alpha1.NormalizePurgeMode(policyv1alpha1.PurgeMode(c.in)) != got {
					t.Errorf("purgeMode %s, want %s", got, c.want)
				}
				if len(res.Unsupported) != 0 {
					t.Errorf("unsupported %v", res.Unsupported)
				}
				if noted := strings.Contains(strings.Join(res.Notes, "\n"), "Karmada before v1.19"); noted != c.noted {
					t.Errorf("noted %v, want %v: %v", noted, c.noted, res.Notes)
				}
			})
		}
	}
}

// A statePreservation rule converts when Flotilla's CRD and hub can use it;
// otherwise it is reported and dropped, and a statePreservation with no
// rule left goes too.
func TestKarmadaStatePreservationRules(t *testing.T) {
	for _, c := range []struct {
		name       string
		alias      string
		jsonPath   string
		want       string // the jsonPath written, "" when the rule is dropped
		reportLike string
	}{
		{"braces", "example.io/checkpoint", "{.jobStatus.checkpointPath}", "{.jobStatus.checkpointPath}", ""},
		{"spaces inside", "checkpoint", "{ .jobStatus.checkpointPath }", "{ .jobStatus.checkpointPath }", ""},
		{"spaces outside are trimmed", "checkpoint", " {.a} ", "{.a}", ""},
		{"filter", "ready", `{.conditions[?(@.type=="Ready")].status}`, `{.conditions[?(@.type=="Ready")].status}`, ""},
		{"no braces", "checkpoint", ".jobStatus.checkpointPath", "", "is not a JSONPath template in braces"},
		{"does not parse", "checkpoint", "{.jobStatus[}", "", "does not parse"},
		{"alias not a label key", "not a label", "{.a}", "", "is not a label key"},
		{"alias with two slashes", "a/b/c", "{.a}", "", "is not a label key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := fmt.Sprintf("apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p}\n"+
				"spec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  failover:\n    cluster:\n      purgeMode: Directly\n"+
				"      statePreservation:\n        rules: [{aliasLabelName: %q, jsonPath: %q}]\n", c.alias, c.jsonPath)
			res, obj := wrapOne(t, doc)
			sp := obj.(*policyv1alpha1.PropagationPolicy).Spec.Failover.Cluster.StatePreservation
			if c.want == "" {
				if sp != nil {
					t.Errorf("statePreservation kept: %+v", sp)
				}
				if len(res.Unsupported) != 1 || res.Unsupported[0].Path != "spec.failover.cluster.statePreservation.rules[0]" ||
					!strings.Contains(res.Unsupported[0].Message, c.reportLike) {
					t.Errorf("unsupported %v", res.Unsupported)
				}
				return
			}
			if len(res.Unsupported) != 0 || sp == nil || !reflect.DeepEqual(sp.Rules, []policyv1alpha1.StatePreservationRule{{AliasLabelName: c.alias, JSONPath: c.want}}) {
				t.Errorf("statePreservation %+v, unsupported %v", sp, res.Unsupported)
			}
		})
	}
}

// spec.association (Karmada's deprecated name for propagateDeps) converts
// when propagateDeps is not set, and never overrides it.
func TestKarmadaAssociation(t *testing.T) {
	for _, c := range []struct {
		spec     string
		wantDeps bool
		note     string
	}{
		{"association: true", true, "became spec.propagateDeps"},
		{"association: false", false, "association: false dropped"},
		{"{association: true, propagateDeps: false}", false, "spec.propagateDeps false wins"},
		{"{association: true, propagateDeps: true}", true, "association: true dropped"},
		{"propagateDeps: true", true, ""},
	} {
		t.Run(c.spec, func(t *testing.T) {
			spec := c.spec
			if strings.HasPrefix(spec, "{") {
				spec = strings.Trim(spec, "{}")
			}
			doc := "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p}\nspec:\n" +
				"  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n"
			for _, kv := range strings.Split(spec, ",") {
				doc += "  " + strings.TrimSpace(kv) + "\n"
			}
			res, obj := wrapOne(t, doc)
			if got := obj.(*policyv1alpha1.PropagationPolicy).Spec.PropagateDeps; got != c.wantDeps {
				t.Errorf("propagateDeps %v", got)
			}
			notes := strings.Join(res.Notes, "\n")
			if c.note != "" && !strings.Contains(notes, c.note) || c.note == "" && notes != "" {
				t.Errorf("notes %q", notes)
			}
			if len(res.Unsupported) != 0 {
				t.Errorf("unsupported %v", res.Unsupported)
			}
		})
	}
}

// decisionConditions.healthyState converts only when it asks for what
// Flotilla does (fail over Unhealthy); anything else is reported.
func TestKarmadaDecisionHealthyState(t *testing.T) {
	for _, c := range []struct {
		value    string
		reported bool
	}{
		{"[Unhealthy]", false},
		{"Unhealthy", false},
		{"[Unhealthy, Unknown]", true},
		{"[Unknown]", true},
	} {
		t.Run(c.value, func(t *testing.T) {
			doc := "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p}\nspec:\n" +
				"  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  failover:\n    application:\n" +
				"      decisionConditions: {tolerationSeconds: 10, healthyState: " + c.value + "}\n"
			res, obj := wrapOne(t, doc)
			if ts := obj.(*policyv1alpha1.PropagationPolicy).Spec.Failover.Application.DecisionConditions.TolerationSeconds; ts == nil || *ts != 10 {
				t.Errorf("tolerationSeconds %v", ts)
			}
			reported := len(res.Unsupported) == 1 && res.Unsupported[0].Path == "spec.failover.application.decisionConditions.healthyState" &&
				strings.Contains(res.Unsupported[0].Message, "Flotilla fails over Unhealthy applications only")
			if reported != c.reported || !c.reported && len(res.Unsupported) != 0 {
				t.Errorf("unsupported %v", res.Unsupported)
			}
		})
	}
}

func TestPodDependencies(t *testing.T) {
	for _, c := range []struct {
		name string
		obj  string
		want []depRef
	}{
		{"deployment, every kind of reference",
			`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{
			  "serviceAccountName":"sa","imagePullSecrets":[{"name":"pull"}],
			  "volumes":[{"name":"a","configMap":{"name":"cm-vol"}},{"name":"b","secret":{"secretName":"s-vol"}},
			    {"name":"c","persistentVolumeClaim":{"claimName":"pvc"}},
			    {"name":"d","projected":{"sources":[{"configMap":{"name":"cm-proj"}},{"secret":{"name":"s-proj"}}]}}],
			  "initContainers":[{"name":"i","envFrom":[{"secretRef":{"name":"s-init"}}]}],
			  "containers":[{"name":"c","envFrom":[{"configMapRef":{"name":"cm-from"}}],
			    "env":[{"name":"X","valueFrom":{"configMapKeyRef":{"name":"cm-key","key":"k"}}},
			      {"name":"Y","valueFrom":{"secretKeyRef":{"name":"s-key","key":"k"}}},{"name":"Z","value":"plain"}]}]}}}}`,
			[]depRef{{"ConfigMap", "cm-from"}, {"ConfigMap", "cm-key"}, {"ConfigMap", "cm-proj"}, {"ConfigMap", "cm-vol"},
				{"PersistentVolumeClaim", "pvc"}, {"Secret", "pull"}, {"Secret", "s-init"}, {"Secret", "s-key"},
				{"Secret", "s-proj"}, {"Secret", "s-vol"}, {"ServiceAccount", "sa"}}},
		{"pod, default service account skipped, duplicates once",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"serviceAccountName":"default",
			  "volumes":[{"name":"a","configMap":{"name":"cm"}}],"containers":[{"name":"c","envFrom":[{"configMapRef":{"name":"cm"}}]}]}}`,
			[]depRef{{"ConfigMap", "cm"}}},
		{"cronjob",
			`{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"c"},"spec":{"jobTemplate":{"spec":{"template":{"spec":{
			  "containers":[{"name":"c","envFrom":[{"secretRef":{"name":"s"}}]}]}}}}}}`,
			[]depRef{{"Secret", "s"}}},
		{"no pod template", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON([]byte(c.obj)); err != nil {
				t.Fatal(err)
			}
			var got []depRef
			if spec, ok := podSpecOf(obj); ok {
				got = podDependencies(spec)
			}
			if len(got) == 0 && len(c.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v\nwant %v", got, c.want)
			}
		})
	}
	if deps := podDependencies(&corev1.PodSpec{}); len(deps) != 0 {
		t.Errorf("empty spec: %v", deps)
	}
}

// Missing dependencies are noted only for workloads a propagateDeps policy
// of the input selects (by kind, namespace, name and labels).
func TestNoteMissingDepsSelection(t *testing.T) {
	const workloads = `apiVersion: apps/v1
kind: Deployment
metadata: {name: a, namespace: shop, labels: {tier: web}}
spec: {template: {spec: {containers: [{name: c, envFrom: [{configMapRef: {name: cfg-a}}]}]}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: b, namespace: shop, labels: {tier: db}}
spec: {template: {spec: {containers: [{name: c, envFrom: [{configMapRef: {name: cfg-b}}]}]}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: c, namespace: other, labels: {tier: web}}
spec: {template: {spec: {containers: [{name: c, envFrom: [{configMapRef: {name: cfg-c}}]}]}}}
---
`
	for _, c := range []struct {
		name, policy string
		want         []string // configmaps noted
	}{
		{"PropagationPolicy by labels, its namespace only",
			"apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p, namespace: shop}\nspec:\n  propagateDeps: true\n" +
				"  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, labelSelector: {matchLabels: {tier: web}}}]\n",
			[]string{"cfg-a"}},
		{"ClusterPropagationPolicy by labels, every namespace",
			"apiVersion: policy.karmada.io/v1alpha1\nkind: ClusterPropagationPolicy\nmetadata: {name: p}\nspec:\n  propagateDeps: true\n" +
				"  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, labelSelector: {matchLabels: {tier: web}}}]\n",
			[]string{"cfg-a", "cfg-c"}},
		{"by name",
			"apiVersion: policy.karmada.io/v1alpha1\nkind: ClusterPropagationPolicy\nmetadata: {name: p}\nspec:\n  propagateDeps: true\n" +
				"  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, namespace: shop, name: b}]\n",
			[]string{"cfg-b"}},
		{"without propagateDeps nothing",
			"apiVersion: policy.karmada.io/v1alpha1\nkind: ClusterPropagationPolicy\nmetadata: {name: p}\nspec:\n" +
				"  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]\n",
			nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := Wrap([]Input{{Name: "in", Data: []byte(workloads + c.policy)}}, Options{FromKarmada: true})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range res.Notes {
				if _, rest, ok := strings.Cut(n, " needs ConfigMap "); ok {
					got = append(got, strings.Fields(rest)[0])
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("noted %v, want %v\n%s", got, c.want, strings.Join(res.Notes, "\n"))
			}
		})
	}
}
