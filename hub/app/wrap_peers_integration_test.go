package app_test

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

const peersTestdata = "../../pkg/wrap/testdata/"

// What `hub wrap --from-ocm` and `hub wrap --from-kubefleet` write from the
// OCM and KubeFleet testdata is accepted by the real CRDs (and the hub's
// admission policies), and the stored policies keep their placement and
// rolloutStrategy as converted, the CRDs' defaults aside. The files that
// report unsupported fields are converted with --allow-unsupported: what
// is written must still apply.
func TestWrapPeersOnAPIServer(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	ctx := context.Background()
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	for _, ns := range []string{"shop", "payments", "ops", "web"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	policies := 0
	for _, c := range []struct {
		flag, file       string
		allowUnsupported bool
	}{
		{"--from-ocm", "ocm/rollout-progressive.yaml", false},
		{"--from-ocm", "ocm/rollout-per-group.yaml", false},
		{"--from-ocm", "ocm/unsupported.yaml", true},
		{"--from-kubefleet", "kubefleet/rolling-update.yaml", false},
		{"--from-kubefleet", "kubefleet/staged.yaml", false},
		{"--from-kubefleet", "kubefleet/examples.yaml", true},
		{"--from-kubefleet", "kubefleet/unsupported.yaml", true},
	} {
		args := []string{"wrap", c.flag, "-f", filepath.Join(peersTestdata, c.file)}
		if c.allowUnsupported {
			args = append(args, "--allow-unsupported")
		}
		for _, obj := range decodeFlotillaStream(t, hubWrap(t, args...)) {
			if createPeerOutput(ctx, t, fc, c.file, obj) {
				policies++
			}
		}
	}
	if policies != 11 {
		t.Errorf("%d policies converted, want 11", policies)
	}
}

// createPeerOutput creates one converted object and, for a policy, checks
// what the apiserver stored; it says whether obj was a policy. Templates
// two files share (the Namespace payments) are created once.
func createPeerOutput(ctx context.Context, t *testing.T, fc flotillaclient.Interface, file string, obj runtime.Object) bool {
	t.Helper()
	var err error
	var sent, stored *policyv1alpha1.PropagationSpec
	switch o := obj.(type) {
	case *workv1alpha1.ResourceTemplate:
		_, err = fc.WorkV1alpha1().ResourceTemplates(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *workv1alpha1.ClusterResourceTemplate:
		_, err = fc.WorkV1alpha1().ClusterResourceTemplates().Create(ctx, o, metav1.CreateOptions{})
	case *policyv1alpha1.PropagationPolicy:
		var got *policyv1alpha1.PropagationPolicy
		if got, err = fc.PolicyV1alpha1().PropagationPolicies(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); err == nil {
			sent, stored = &o.Spec, &got.Spec
		}
	case *policyv1alpha1.ClusterPropagationPolicy:
		var got *policyv1alpha1.ClusterPropagationPolicy
		if got, err = fc.PolicyV1alpha1().ClusterPropagationPolicies().Create(ctx, o, metav1.CreateOptions{}); err == nil {
			sent, stored = &o.Spec, &got.Spec
		}
	default:
		t.Fatalf("%s: unexpected %T", file, obj)
	}
	if apierrors.IsAlreadyExists(err) {
		if _, isPolicy := obj.(*policyv1alpha1.PropagationPolicy); !isPolicy {
			if _, isCluster := obj.(*policyv1alpha1.ClusterPropagationPolicy); !isCluster {
				return false
			}
		}
	}
	if err != nil {
		t.Fatalf("%s: creating %T: %v", file, obj, err)
	}
	if sent == nil {
		return false
	}
	want := withRolloutDefaults(sent.RolloutStrategy)
	if !equality.Semantic.DeepEqual(stored.RolloutStrategy, want) {
		t.Errorf("%s: stored rolloutStrategy\n%s\nwant\n%s", file, toJSONForWrapTest(stored.RolloutStrategy), toJSONForWrapTest(want))
	}
	if !equality.Semantic.DeepEqual(stored.Placement, sent.Placement) || !equality.Semantic.DeepEqual(stored.ResourceSelectors, sent.ResourceSelectors) {
		t.Errorf("%s: stored placement or selectors\n%s\nwant\n%s", file, toJSONForWrapTest(stored), toJSONForWrapTest(sent))
	}
	return true
}

// withRolloutDefaults is rs as the CRD defaults it.
func withRolloutDefaults(rs *policyv1alpha1.RolloutStrategy) *policyv1alpha1.RolloutStrategy {
	if rs == nil {
		return nil
	}
	rs = rs.DeepCopy()
	if rs.RevisionHistoryLimit == nil {
		rs.RevisionHistoryLimit = ptr.To[int32](10)
	}
	if pg := rs.ProgressivePerGroup; pg != nil {
		for i := range pg.DecisionGroups {
			if pg.DecisionGroups[i].Approval == "" {
				pg.DecisionGroups[i].Approval = policyv1alpha1.ApprovalNone
			}
		}
	}
	return rs
}
