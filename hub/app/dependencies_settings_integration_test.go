package app_test

import (
	"context"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// dpWorkSettings is what a dependency's Work says about how the member
// handles the object.
type dpWorkSettings struct {
	preserve, suspended bool
	apply               policyv1alpha1.ApplyStrategy
	conflict            policyv1alpha1.ConflictResolution
}

func dpSettingsOf(w *workv1alpha1.Work) dpWorkSettings {
	return dpWorkSettings{preserve: ptr.Deref(w.Spec.PreserveResourcesOnDeletion, false), suspended: ptr.Deref(w.Spec.SuspendDispatching, false),
		apply: w.Spec.ApplyStrategy, conflict: w.Spec.ConflictResolution}
}

// dpWaitSettings waits until the binding's Work on cluster says want.
func dpWaitSettings(t *testing.T, fc flotillaclient.Interface, cluster, ns, binding string, want dpWorkSettings) {
	t.Helper()
	var got dpWorkSettings
	waitUntil(t, fmt.Sprintf("Work of %s on %s says %+v", binding, cluster, want), func() (bool, error) {
		w, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(context.Background(), workobjects.WorkName(ns, binding), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		got = dpSettingsOf(w)
		if got != want {
			t.Logf("Work of %s on %s says %+v", binding, cluster, got)
		}
		return got == want, nil
	})
}

// Issue 30 item 4: a dependency follows the policy that needs it, and when
// several workloads with different settings need it on one cluster the
// safest setting wins (preserve over delete, ReadOnly over write,
// suspended over dispatched, Abort over Overwrite). "keeper" (member1:
// preserveResourcesOnDeletion, ReadOnly, suspended, Abort) and "plain"
// (member1 and member2: defaults but Overwrite) both mount Secret db-creds,
// which no policy selects. On member1 the Secret's Work is preserved,
// read-only, suspended and Abort; on member2 it is plain's (Overwrite).
// Deleting keeper's template last deletes the Secret's Work on member1
// with preserveResourcesOnDeletion still true: the member keeps the data.
func TestDependenciesFollowTheSafestPolicy(t *testing.T) {
	t.Parallel()
	ctx, fc, _ := dpStartHub(t, "member1", "member2")
	ns := "default"
	dpCreate(t, ctx, fc, ns, "db-creds", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db-creds"},"stringData":{"password":"s3cret"}}`)
	deployment := func(name string) string {
		return `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"` + name + `"},
"spec":{"replicas":1,"selector":{"matchLabels":{"app":"` + name + `"}},"template":{"metadata":{"labels":{"app":"` + name + `"}},
"spec":{"containers":[{"name":"c","image":"nginx:1.27"}],"volumes":[{"name":"creds","secret":{"secretName":"db-creds"}}]}}}}`
	}
	keeper := dpPolicy(ns, "keeper", "Deployment", "keeper", true,
		policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1"}}})
	keeper.Spec.PreserveResourcesOnDeletion = ptr.To(true)
	keeper.Spec.ApplyStrategy = policyv1alpha1.ApplyStrategyReadOnly
	keeper.Spec.Suspension = &policyv1alpha1.Suspension{Dispatching: ptr.To(true)}
	keeper.Spec.ConflictResolution = policyv1alpha1.ConflictAbort
	plain := dpPolicy(ns, "plain", "Deployment", "plain", true,
		policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}}})
	plain.Spec.ConflictResolution = policyv1alpha1.ConflictOverwrite
	for _, p := range []*policyv1alpha1.PropagationPolicy{keeper, plain} {
		if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dpCreate(t, ctx, fc, ns, "keeper", deployment("keeper"))
	dpCreate(t, ctx, fc, ns, "plain", deployment("plain"))
	const creds = "db-creds-secret"

	safest := dpWorkSettings{preserve: true, suspended: true, apply: policyv1alpha1.ApplyStrategyReadOnly, conflict: policyv1alpha1.ConflictAbort}
	plainOnly := dpWorkSettings{apply: policyv1alpha1.ApplyStrategyServerSideApply, conflict: policyv1alpha1.ConflictOverwrite}
	dpWaitSettings(t, fc, "member1", ns, creds, safest)
	dpWaitSettings(t, fc, "member2", ns, creds, plainOnly)

	// plain goes: member2's copy goes, member1's keeps keeper's settings.
	if err := fc.WorkV1alpha1().ResourceTemplates(ns).Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dpWorkGone(t, fc, "member2", ns, creds)
	dpWaitSettings(t, fc, "member1", ns, creds, safest)

	// keeper goes: the Secret's Work is deleted still saying preserve.
	if err := fc.WorkV1alpha1().ResourceTemplates(ns).Delete(ctx, "keeper", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the Secret's Work on member1 deleted, preserving the Secret on the member", func() (bool, error) {
		w, err := fc.WorkV1alpha1().Works("flotilla-es-member1").Get(ctx, workobjects.WorkName(ns, creds), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, fmt.Errorf("the Work went without the agent: cannot tell what it said")
		}
		if err != nil {
			return false, err
		}
		if w.DeletionTimestamp == nil {
			return false, nil
		}
		if !ptr.Deref(w.Spec.PreserveResourcesOnDeletion, false) {
			return false, fmt.Errorf("the Secret's Work is being deleted without preserveResourcesOnDeletion: the agent deletes the Secret keeper's policy said to keep")
		}
		return true, nil
	})
	dpWorkGone(t, fc, "member1", ns, creds)
}
