package wrap

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

const (
	ocmTestdata   = "testdata/ocm"
	fleetTestdata = "testdata/kubefleet"
)

// peerOptions converts every peer's objects.
var peerOptions = Options{FromOCM: true, FromKubeFleet: true}

// convertPeerFile wraps one testdata file with --from-ocm and
// --from-kubefleet and returns the result and its output decoded strictly;
// every emitted policy is one Flotilla's CRDs accept.
func convertPeerFile(t *testing.T, path string) (*Result, []runtime.Object) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return convertPeerDoc(t, filepath.Base(path), string(data))
}

func convertPeerDoc(t *testing.T, name, doc string) (*Result, []runtime.Object) {
	t.Helper()
	res, err := Wrap([]Input{{Name: name, Data: []byte(doc)}}, peerOptions)
	if err != nil {
		t.Fatal(err)
	}
	out, err := res.YAML()
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeStream(t, out)
	for _, o := range objs {
		if spec := policySpec(o); spec != nil {
			if problems := specProblems(spec); len(problems) > 0 {
				t.Errorf("%T %s would be refused: %s", o, name, strings.Join(problems, "; "))
			}
		}
	}
	return res, objs
}

func policySpec(o runtime.Object) *policyv1alpha1.PropagationSpec {
	switch p := o.(type) {
	case *policyv1alpha1.PropagationPolicy:
		return &p.Spec
	case *policyv1alpha1.ClusterPropagationPolicy:
		return &p.Spec
	}
	return nil
}

// findings are the unsupported findings of res as "Object: path" (the
// object alone for a whole object), sorted.
func findings(res *Result) []string {
	var out []string
	for _, f := range res.Unsupported {
		if f.Path == "" {
			out = append(out, f.Object)
		} else {
			out = append(out, f.Object+": "+f.Path)
		}
	}
	sort.Strings(out)
	return out
}

// noteAt is the note of res on object: path, "" without one.
func noteAt(res *Result, objectPath string) string {
	for _, n := range res.Notes {
		if strings.HasPrefix(n, objectPath+": ") {
			return n
		}
	}
	return ""
}

func kindsOf(objs []runtime.Object) []string {
	var out []string
	for _, o := range objs {
		m, _ := metaOf(o)
		out = append(out, fmt.Sprintf("%s %s", o.GetObjectKind().GroupVersionKind().Kind, describeName(m.Namespace, m.Name)))
	}
	return out
}

func metaOf(o runtime.Object) (metav1.ObjectMeta, bool) {
	if a, ok := o.(metav1.ObjectMetaAccessor); ok {
		return *a.GetObjectMeta().(*metav1.ObjectMeta), true
	}
	return metav1.ObjectMeta{}, false
}

var (
	crdMaxConcurrency = regexp.MustCompile(`^((100|[1-9][0-9]?)%|[1-9][0-9]*)$`)
	crdMaxFailures    = regexp.MustCompile(`^((100|[0-9]{1,2})%|[0-9]+)$`)
	crdGroupName      = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// specProblems are what Flotilla's CRDs (and the rollout controller's
// reading of them) would refuse in a converted policy's spec: the
// validation rules of pkg/apis/policy/v1alpha1, written out independently
// of the conversion.
func specProblems(spec *policyv1alpha1.PropagationSpec) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if n := len(spec.ResourceSelectors); n < 1 || n > 128 {
		bad("%d resourceSelectors", n)
	}
	for i, rs := range spec.ResourceSelectors {
		if rs.APIVersion == "" || rs.Kind == "" {
			bad("resourceSelectors[%d] without apiVersion or kind", i)
		}
		if _, err := metav1.LabelSelectorAsSelector(rs.LabelSelector); err != nil {
			bad("resourceSelectors[%d].labelSelector: %v", i, err)
		}
	}
	selector := func(path string, ls *metav1.LabelSelector, required bool) {
		if ls == nil {
			if required {
				bad("%s missing", path)
			}
			return
		}
		if len(ls.MatchLabels) > 64 || len(ls.MatchExpressions) > 32 {
			bad("%s too large", path)
		}
		if _, err := metav1.LabelSelectorAsSelector(ls); err != nil {
			bad("%s: %v", path, err)
		}
	}
	if a := spec.Placement.ClusterAffinity; a != nil {
		selector("clusterAffinity.labelSelector", a.LabelSelector, false)
		if len(a.ClusterNames) > 1024 {
			bad("%d clusterNames", len(a.ClusterNames))
		}
		for _, n := range a.ClusterNames {
			if len(n) > 253 {
				bad("clusterNames: %q too long", n)
			}
		}
	}
	if len(spec.Placement.ClusterTolerations) > 64 || len(spec.Placement.SpreadConstraints) > 8 {
		bad("too many tolerations or spread constraints")
	}
	rs := spec.RolloutStrategy
	if rs == nil {
		return out
	}
	count := func(path string, v *intstr.IntOrString, pattern *regexp.Regexp, least int32) {
		switch {
		case v == nil:
		case v.Type == intstr.Int && v.IntVal < least:
			bad("%s %d", path, v.IntVal)
		case v.Type == intstr.String && !pattern.MatchString(v.StrVal):
			bad("%s %q", path, v.StrVal)
		}
	}
	config := func(path string, c policyv1alpha1.RolloutConfig) {
		if c.MinSuccessTime.Duration < 0 || c.ProgressDeadline != nil && c.ProgressDeadline.Duration <= 0 {
			bad("%s: negative duration", path)
		}
		count(path+".maxFailures", c.MaxFailures, crdMaxFailures, 0)
	}
	if l := rs.RevisionHistoryLimit; l != nil && (*l < 1 || *l > 100) {
		bad("revisionHistoryLimit %d", *l)
	}
	switch rs.Type {
	case policyv1alpha1.RolloutTypeAll, "":
		if rs.Progressive != nil || rs.ProgressivePerGroup != nil {
			bad("type All with progressive settings")
		}
	case policyv1alpha1.RolloutTypeProgressive:
		if rs.Progressive == nil || rs.ProgressivePerGroup != nil {
			bad("type Progressive without progressive")
			break
		}
		config("progressive", rs.Progressive.RolloutConfig)
		count("progressive.maxConcurrency", rs.Progressive.MaxConcurrency, crdMaxConcurrency, 1)
		if len(rs.Progressive.SortingLabelKey) > 317 {
			bad("sortingLabelKey too long")
		}
	case policyv1alpha1.RolloutTypeProgressivePerGroup:
		pg := rs.ProgressivePerGroup
		if pg == nil || rs.Progressive != nil {
			bad("type ProgressivePerGroup without progressivePerGroup")
			break
		}
		config("progressivePerGroup", pg.RolloutConfig)
		if n := len(pg.DecisionGroups); n < 1 || n > 16 {
			bad("%d decisionGroups", n)
		}
		seen := map[string]bool{}
		for i, g := range pg.DecisionGroups {
			path := fmt.Sprintf("decisionGroups[%d]", i)
			if len(g.GroupName) > 63 || !crdGroupName.MatchString(g.GroupName) || g.GroupName == policyv1alpha1.RemainingGroupName || seen[g.GroupName] {
				bad("%s.groupName %q", path, g.GroupName)
			}
			seen[g.GroupName] = true
			selector(path+".groupClusterSelector.labelSelector", g.GroupClusterSelector.LabelSelector, true)
			count(path+".maxConcurrency", g.MaxConcurrency, crdMaxConcurrency, 1)
			if g.Approval != "" && g.Approval != policyv1alpha1.ApprovalNone && g.Approval != policyv1alpha1.ApprovalRequired {
				bad("%s.approval %q", path, g.Approval)
			}
		}
	default:
		bad("type %q", rs.Type)
	}
	return out
}

// Without their flag, OCM and KubeFleet objects are refused (they would
// otherwise be wrapped as templates and land on the members), naming the
// flag.
func TestWrapPeersNeedTheirFlag(t *testing.T) {
	for _, c := range []struct{ doc, flag string }{
		{"apiVersion: work.open-cluster-management.io/v1alpha1\nkind: ManifestWorkReplicaSet\nmetadata: {name: m}\n", "--from-ocm"},
		{"apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata: {name: p}\n", "--from-ocm"},
		{"apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata: {name: c}\n", "--from-kubefleet"},
		{"apiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\nmetadata: {name: m}\n", "--from-kubefleet"},
	} {
		_, err := Wrap([]Input{{Name: "in.yaml", Data: []byte(c.doc)}}, Options{FromKarmada: true})
		if err == nil || !strings.Contains(err.Error(), c.flag) || !strings.Contains(err.Error(), "in.yaml, document 1") {
			t.Errorf("%s: err %v, want one naming %s", strings.SplitN(c.doc, "\n", 3)[1], err, c.flag)
		}
	}
	// One flag does not let the other project in.
	_, err := Wrap([]Input{{Name: "in", Data: []byte("apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata: {name: c}\n")}},
		Options{FromOCM: true})
	if err == nil || !strings.Contains(err.Error(), "--from-kubefleet") {
		t.Errorf("err %v", err)
	}
}

// A manifest of a ManifestWorkReplicaSet is checked like a document, and
// its error names the manifest.
func TestWrapOCMBadManifests(t *testing.T) {
	for _, c := range []struct{ manifests, want string }{
		{"[{apiVersion: v1, kind: ConfigMap}]", "manifests[0]: ConfigMap has no metadata.name"},
		{"[just-a-string]", "manifests[0]: not a Kubernetes object (a string"},
		{"{apiVersion: v1}", "manifests is a mapping, not a list"},
	} {
		doc := "apiVersion: work.open-cluster-management.io/v1alpha1\nkind: ManifestWorkReplicaSet\nmetadata: {name: m}\n" +
			"spec:\n  placementRefs: [{name: p}]\n  manifestWorkTemplate:\n    workload:\n      manifests: " + c.manifests + "\n"
		_, err := Wrap([]Input{{Name: "in", Data: []byte(doc)}}, peerOptions)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.manifests, err, c.want)
		}
	}
}

// The durations written for a peer's "no deadline" and defaults read as
// the notes say.
func TestWrapPeerDurations(t *testing.T) {
	if got := durationString(noProgressDeadline); got != "87600h0m0s" {
		t.Errorf("noProgressDeadline %s", got)
	}
	if noProgressDeadline < 3650*24*time.Hour {
		t.Errorf("noProgressDeadline %v is less than ten years", noProgressDeadline)
	}
}

// groupName keeps DNS labels, lower-cases and dashes OCM's names, and
// refuses what cannot become one, and Flotilla's remaining group.
func TestWrapGroupName(t *testing.T) {
	for _, c := range []struct {
		in, out string
		renamed bool
	}{
		{"canary", "canary", false},
		{"canary_West", "canary-west", true},
		{"prod.eu", "prod-eu", true},
		{"remaining", "", false},
		{"-x", "", false},
		{strings.Repeat("a", 64), "", false},
		{"", "", false},
	} {
		out, renamed := groupName(c.in)
		if out != c.out || renamed != c.renamed {
			t.Errorf("groupName(%q) = %q, %v; want %q, %v", c.in, out, renamed, c.out, c.renamed)
		}
		if out != "" && len(validation.IsDNS1123Label(out)) > 0 {
			t.Errorf("%q is not a DNS label", out)
		}
	}
}

// A peer object's fields hub wrap does not know, or of the wrong type, are
// reported with their paths and dropped; what is left converts.
func TestWrapPeerRejectedFields(t *testing.T) {
	const doc = `apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata: {name: c}
spec:
  resourceSelectors:
  - {group: rbac.authorization.k8s.io, version: v1, kind: ClusterRole, name: r, colour: blue}
  strategy:
    rollingUpdate: {maxUnavailable: [1], unavailablePeriodSeconds: soon}
  policy: {placementType: PickFixed, clusterNames: [a, {b: c}]}
`
	res, objs := convertPeerDoc(t, "in", doc)
	want := []string{
		"ClusterResourcePlacement c: spec.policy.clusterNames[1]",
		"ClusterResourcePlacement c: spec.resourceSelectors[0].colour",
		"ClusterResourcePlacement c: spec.strategy.rollingUpdate.maxUnavailable",
		"ClusterResourcePlacement c: spec.strategy.rollingUpdate.unavailablePeriodSeconds",
	}
	if got := findings(res); !slices.Equal(got, want) {
		t.Errorf("findings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	spec := policySpec(objs[0])
	if !slices.Equal(spec.Placement.ClusterAffinity.ClusterNames, []string{"a"}) || spec.ResourceSelectors[0].Name != "r" ||
		spec.RolloutStrategy.Progressive.MaxConcurrency.String() != "25%" {
		t.Errorf("spec %s", toJSON(spec))
	}
	for _, f := range res.Unsupported {
		if f.Path == "spec.resourceSelectors[0].colour" && !strings.Contains(f.Message, "not a field hub wrap converts from KubeFleet") ||
			f.Path == "spec.policy.clusterNames[1]" && !strings.Contains(f.Message, "wrong type") {
			t.Errorf("message %q", f)
		}
	}
}

// Of two Placements (or two ClusterStagedUpdateStrategies) of one name,
// the first is converted and the second reported as such.
func TestWrapPeerDuplicates(t *testing.T) {
	doc := ocmDoc("{}", "{}") + "---\napiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata: {name: p, namespace: ns}\n" +
		"---\n" + crpDoc("{type: External}", "") +
		"---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateRun\nmetadata: {name: r}\nspec: {placementName: c, stagedRolloutStrategyName: s}\n" +
		"---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateStrategy\nmetadata: {name: s}\nspec: {stages: [{name: a, labelSelector: {}}]}\n" +
		"---\napiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateStrategy\nmetadata: {name: s}\nspec: {stages: []}\n"
	res, objs := convertPeerDoc(t, "in", doc)
	want := []string{"ClusterStagedUpdateStrategy s (placement.kubernetes-fleet.io/v1beta1)", "Placement ns/p (cluster.open-cluster-management.io/v1beta1)"}
	if got := findings(res); !slices.Equal(got, want) {
		t.Errorf("findings %v", got)
	}
	for _, f := range res.Unsupported {
		if !strings.Contains(f.Message, "the one converted") || !strings.HasSuffix(f.Source, "document 3") && !strings.HasSuffix(f.Source, "document 7") {
			t.Errorf("%s", f)
		}
	}
	if pg := policySpec(objs[len(objs)-1]).RolloutStrategy.ProgressivePerGroup; pg == nil || pg.DecisionGroups[0].GroupName != "a" {
		t.Errorf("kinds %v", kindsOf(objs))
	}
}
