package wrap

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter/customization"
)

// maxWrapTime bounds one Wrap of a fuzzed input: parsing YAML and Lua and
// compiling the CEL translation. Generous for a loaded machine; a
// super-linear path (a nested parse, a compile per character) exceeds it.
const maxWrapTime = time.Second

// karmadaCustomizationDoc is a Karmada customization of one operation
// whose script is lua, as JSON (a YAML stream too): YAML itself cannot
// carry every string (control characters), and Wrap must refuse those
// with an error.
func karmadaCustomizationDoc(t *testing.T, op, lua string) []byte {
	t.Helper()
	doc, err := json.Marshal(map[string]any{
		"apiVersion": "config.karmada.io/v1alpha1",
		"kind":       "ResourceInterpreterCustomization",
		"metadata":   map[string]any{"name": "fuzz"},
		"spec": map[string]any{
			"target":         map[string]any{"apiVersion": "example.com/v1", "kind": "Widget"},
			"customizations": map[string]any{op: map[string]any{"luaScript": lua}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// checkWrap wraps doc and checks what `hub wrap` promises: no panic, bounded
// time, and either an error or output the hub accepts — every customization
// it emits passes the webhook's check (customization.Validate), every
// policy converted from OCM or KubeFleet decodes strictly and passes the
// CRD's rules (specProblems), every object left out is reported with a
// reason, and the output is YAML. convert turns on --from-karmada,
// --from-ocm and --from-kubefleet.
func checkWrap(t *testing.T, doc []byte, convert bool) {
	t.Helper()
	start := time.Now()
	res, err := Wrap([]Input{{Name: "fuzz", Data: doc}}, Options{FromKarmada: convert, FromOCM: convert, FromKubeFleet: convert})
	if d := time.Since(start); d > maxWrapTime {
		t.Fatalf("Wrap took %v (> %v) for %d bytes: %q", d, maxWrapTime, len(doc), doc)
	}
	if err != nil {
		if err.Error() == "" {
			t.Fatal("an error without a message")
		}
		return
	}
	if _, err := res.YAML(); err != nil {
		t.Fatalf("the output is not YAML: %v", err)
	}
	for _, o := range res.Objects {
		if o.Object == nil {
			t.Fatalf("an empty object in the output: %q", doc)
		}
	}
	for _, o := range res.peerPolicies {
		kind := o.GetKind()
		if o.GetAPIVersion() != policyv1alpha1.SchemeGroupVersion.String() || kind != "PropagationPolicy" && kind != "ClusterPropagationPolicy" {
			t.Fatalf("a peer's object became %s %s", o.GetAPIVersion(), kind)
		}
		data, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := strictDecoder.Decode(data, nil, nil)
		if err != nil {
			t.Fatalf("an emitted %s does not decode strictly: %v\ninput: %q", kind, err, doc)
		}
		if problems := specProblems(policySpec(obj)); len(problems) > 0 {
			t.Fatalf("hub wrap emitted a %s the CRD refuses: %s\ninput: %q", kind, strings.Join(problems, "; "), doc)
		}
	}
	for _, f := range res.Unsupported {
		if f.Message == "" {
			t.Fatalf("a finding without a reason: %+v", f)
		}
	}
	for _, o := range res.Objects {
		if o.GroupVersionKind() != configv1alpha1.SchemeGroupVersion.WithKind("ResourceInterpreterCustomization") {
			continue
		}
		var ric configv1alpha1.ResourceInterpreterCustomization
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ric); err != nil {
			t.Fatalf("an emitted customization does not decode: %v", err)
		}
		if errs := customization.Validate(&ric); len(errs) > 0 {
			t.Fatalf("hub wrap emitted a customization the webhook refuses: %v\ninput: %q", errs.ToAggregate(), doc)
		}
	}
}

// FuzzWrap feeds `hub wrap` any manifest stream (converting Karmada, OCM
// and KubeFleet objects when the flag says so; seeded with the Karmada
// interpreters and the OCM and KubeFleet testdata), and a Karmada
// customization whose Lua script for one operation is anything.
func FuzzWrap(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(interpretersDir, "*.yaml"))
	for _, dir := range []string{ocmTestdata, fleetTestdata} {
		peers, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		files = append(files, peers...)
	}
	files = append(files, filepath.Join(karmadaTestdata, "issue39-fieldoverrider.yaml"),
		"testdata/karmada-interpreters-guide/empty-requirements.yaml")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data, true, "", "")
		}
	}
	f.Add([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 1e400}\n"), false, "", "")
	f.Add([]byte("---\n- 1\n---\n{}\n"), true, "", "")
	f.Add([]byte(ocmDoc("{type: ProgressivePerGroup, progressivePerGroup: {mandatoryDecisionGroups: [{groupIndex: 0}]}}",
		"{decisionStrategy: {groupStrategy: {decisionGroups: [{groupName: a.B, groupClusterSelector: {labelSelector: {matchLabels: {x: y}}}}]}}}")), true, "", "")
	f.Add([]byte(crpDoc("{type: RollingUpdate, rollingUpdate: {maxUnavailable: 0%, maxSurge: 1}}", "{placementType: PickN, numberOfClusters: 3}")), true, "", "")
	for _, c := range []struct{ op, lua string }{
		{"healthInterpretation", "function InterpretHealth(observedObj)\n  return observedObj.status.readyReplicas == observedObj.spec.replicas\nend"},
		{"replicaResource", "local kube = require(\"kube\")\nfunction GetReplicas(obj)\n  return obj.spec.replicas, kube.accuratePodRequirements(obj.spec.template)\nend"},
		{"statusAggregation", "function AggregateStatus(desiredObj, statusItems)\n  for i = 1, #statusItems do\n    desiredObj.status.n = desiredObj.status.n + statusItems[i].status.n\n  end\n  return desiredObj\nend"},
		{"statusReflection", "function ReflectStatus(observedObj)\n  return {phase = observedObj.status.phase}\nend"},
		{"dependencyInterpretation", "function GetDependencies(desiredObj)\n  return {{apiVersion = \"v1\", kind = \"ConfigMap\", name = desiredObj.spec.config}}\nend"},
		{"retention", "function Retain(desiredObj, observedObj)\n  desiredObj.spec.paused = observedObj.spec.paused\n  return desiredObj\nend"},
		{"replicaRevision", "function ReviseReplica(obj, desiredReplica)\n  obj.spec.replicas = desiredReplica\n  return obj\nend"},
		{"healthInterpretation", "function InterpretHealth(o) return ((((((((((o)))))))))) end"},
		{"healthInterpretation", strings.Repeat("(", 200)},
	} {
		f.Add([]byte(nil), true, c.op, c.lua)
	}
	// Build the CEL environments (~0.7 s, once per process) before any call
	// is timed.
	customization.Validate(&configv1alpha1.ResourceInterpreterCustomization{})
	f.Fuzz(func(t *testing.T, doc []byte, convert bool, op, lua string) {
		if len(doc) > 64<<10 || len(lua) > 16<<10 {
			t.Skip("larger than any manifest the bound is about")
		}
		checkWrap(t, doc, convert)
		if op != "" {
			checkWrap(t, karmadaCustomizationDoc(t, op, lua), true)
		}
	})
}

// Found by FuzzWrap: a Karmada customization whose only script retains
// nothing converted to a customization without any operation, which the
// webhook refuses at apply. Nothing is emitted; the note says why.
func TestWrapEmitsNoCustomizationWithoutARule(t *testing.T) {
	doc := karmadaCustomizationDoc(t, "retention", "function Retain(desiredObj, observedObj) return desiredObj end")
	checkWrap(t, doc, true)
	res, err := Wrap([]Input{{Name: "in", Data: doc}}, Options{FromKarmada: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 0 || len(res.Unsupported) != 1 || !strings.Contains(res.Unsupported[0].Message, "not emitted") {
		t.Fatalf("objects %d, findings %v", len(res.Objects), res.Unsupported)
	}
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "retains nothing") {
		t.Fatalf("notes %q", res.Notes)
	}
}
