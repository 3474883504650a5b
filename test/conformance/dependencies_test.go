package conformance

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// deploymentWithVolume is Karmada's NewDeploymentWithVolumes: the nginx
// Deployment with one volume.
func deploymentWithVolume(name string, volume map[string]any) map[string]any {
	d := deployment(name, 3)
	u := &unstructured.Unstructured{Object: d}
	_ = unstructured.SetNestedSlice(u.Object, []any{volume}, "spec", "template", "spec", "volumes")
	return u.Object
}

// dependencyCase is Karmada's "<kind> automatically propagation testing":
// a Deployment using the dependency, a policy with propagateDeps onto the
// first member; the dependency follows it there, then to the second member
// when the policy's clusterNames change, and a change to the dependency
// reaches it.
func dependencyCase(t *testing.T, dep map[string]any, volume map[string]any, change func(*unstructured.Unstructured), changed func(*unstructured.Unstructured) bool) {
	c := newCase(t)
	members := c.simClusters(2)
	depBinding := c.template(dep)
	c.policy("deploy", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "deploy"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members[0])}, PropagateDeps: true})
	binding := c.template(deploymentWithVolume("deploy", volume))
	c.waitPresent(binding, members[:1], nil)
	c.waitPresent(depBinding, members[:1], nil)
	c.updatePolicy("deploy", func(s *policyv1alpha1.PropagationSpec) { s.Placement.ClusterAffinity = onClusters(members[1]) })
	c.waitPresent(binding, members[1:], nil)
	c.waitPresent(depBinding, members[1:], nil)
	c.waitGone(depBinding, members[0])
	if change != nil {
		c.updateTemplate((&unstructured.Unstructured{Object: dep}).GetName(), change)
		c.waitPresent(depBinding, members[1:], changed)
	}
}

// Karmada: test/e2e/suites/base/dependenciesdistributor_test.go,
// Context("dependencies propagation with propagationPolicy testing"),
// When("configmap propagate automatically"), It("configmap automatically
// propagation testing"). Karmada also checks its GetDependenciesSucceed and
// SyncScheduleResultToDependenciesSucceed events; Flotilla says it with
// the DependenciesResolved condition (docs/comparison.md).
func TestKarmada_Dependencies_ConfigMap(t *testing.T) {
	dependencyCase(t,
		map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm"}, "data": map[string]any{"user": "karmada"}},
		map[string]any{"name": "vol-configmap", "configMap": map[string]any{"name": "cm"}},
		func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "karmada-e2e", "data", "user")
		},
		func(u *unstructured.Unstructured) bool {
			v, _, _ := unstructured.NestedString(u.Object, "data", "user")
			return v == "karmada-e2e"
		})
}

// Karmada: dependenciesdistributor_test.go, When("secret propagate
// automatically"), It("secret automatically propagation testing").
func TestKarmada_Dependencies_Secret(t *testing.T) {
	dependencyCase(t,
		map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "secret"}, "data": map[string]any{"user": "a2FybWFkYQ=="}},
		map[string]any{"name": "vol-secret", "secret": map[string]any{"secretName": "secret"}},
		func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "a2FybWFkYS1lMmU=", "data", "user")
		},
		func(u *unstructured.Unstructured) bool {
			v, _, _ := unstructured.NestedString(u.Object, "data", "user")
			return v == "a2FybWFkYS1lMmU="
		})
}

// Karmada: dependenciesdistributor_test.go, When("persistentVolumeClaim
// propagate automatically"), It("persistentVolumeClaim automatically
// propagation testing").
func TestKarmada_Dependencies_PersistentVolumeClaim(t *testing.T) {
	dependencyCase(t,
		map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": map[string]any{"name": "pvc"},
			"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}},
		map[string]any{"name": "vol-pvc", "persistentVolumeClaim": map[string]any{"claimName": "pvc"}},
		nil, nil)
}

// Karmada: dependenciesdistributor_test.go, When("serviceAccount propagate
// automatically"), It("serviceAccount automatically propagation testing").
func TestKarmada_Dependencies_ServiceAccount(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	depBinding := c.template(map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "sa"}})
	c.policy("deploy", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "deploy"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members[0])}, PropagateDeps: true})
	d := deployment("deploy", 3)
	u := &unstructured.Unstructured{Object: d}
	_ = unstructured.SetNestedField(u.Object, "sa", "spec", "template", "spec", "serviceAccountName")
	binding := c.template(u.Object)
	c.waitPresent(binding, members[:1], nil)
	c.waitPresent(depBinding, members[:1], nil)
	c.updatePolicy("deploy", func(s *policyv1alpha1.PropagationSpec) { s.Placement.ClusterAffinity = onClusters(members[1]) })
	c.waitPresent(depBinding, members[1:], nil)
	c.waitGone(depBinding, members[0])
}

// Karmada: dependenciesdistributor_test.go, Context("dependency policy
// conflict detected and resolved testing"), It("conflict on both fields"):
// two Deployments with propagateDeps mount one ConfigMap onto one member;
// policy A says Overwrite and preserveResourcesOnDeletion, policy B Abort
// and not. Karmada resolves the ConfigMap to Overwrite + preserve; Flotilla
// to the safest of each, Abort + preserve (differs by design:
// docs/comparison.md, TestDependenciesFollowTheSafestPolicy).
func TestKarmada_Dependencies_PolicyConflict_BothFields(t *testing.T) {
	c := newCase(t)
	member := c.simClusters(1)[0]
	cm := c.template(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm"}, "data": map[string]any{"user": "karmada"}})
	volume := map[string]any{"name": "vol-configmap", "configMap": map[string]any{"name": "cm"}}
	c.policy("deploy-a", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "deploy-a"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(member)}, PropagateDeps: true,
		ConflictResolution: policyv1alpha1.ConflictOverwrite, PreserveResourcesOnDeletion: ptr.To(true)})
	c.policy("deploy-b", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "deploy-b"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(member)}, PropagateDeps: true,
		ConflictResolution: policyv1alpha1.ConflictAbort, PreserveResourcesOnDeletion: ptr.To(false)})
	c.template(deploymentWithVolume("deploy-a", volume))
	c.template(deploymentWithVolume("deploy-b", volume))
	c.eventually("the ConfigMap's Work resolves to Abort + preserve", func() (bool, error) {
		w, _ := c.work(member, cm)
		return w != nil && w.Spec.ConflictResolution == policyv1alpha1.ConflictAbort && ptr.Deref(w.Spec.PreserveResourcesOnDeletion, false), nil
	})
	c.eventually("the ConfigMap's binding is required by both", func() (bool, error) {
		rb := c.binding(cm)
		return rb != nil && len(rb.Spec.RequiredBy) == 2, nil
	})
}

// Karmada: dependenciesdistributor_test.go, Context("dependencies
// propagation with clusterPropagationPolicy testing"), When("configmap
// propagate automatically"), It("configmap automatically propagation
// testing"): the same with a ClusterPropagationPolicy selecting the
// Deployment by namespace and name.
func TestKarmada_Dependencies_ClusterPropagationPolicy_ConfigMap(t *testing.T) {
	c := newCase(t)
	members := c.simClusters(2)
	depBinding := c.template(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm"}, "data": map[string]any{"user": "karmada"}})
	c.clusterPolicy("cpp-"+c.id, policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: c.ns, Name: "deploy"}},
		Placement:         policyv1alpha1.Placement{ClusterAffinity: onClusters(members[0])}, PropagateDeps: true})
	binding := c.template(deploymentWithVolume("deploy", map[string]any{"name": "vol-configmap", "configMap": map[string]any{"name": "cm"}}))
	c.waitPresent(binding, members[:1], nil)
	c.waitPresent(depBinding, members[:1], nil)
	c.eventually("DependenciesResolved on the binding", func() (bool, error) {
		rb := c.binding(binding)
		if rb == nil {
			return false, nil
		}
		for _, cond := range rb.Status.Conditions {
			if cond.Type == workv1alpha1.BindingConditionDependenciesResolved && cond.Status == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}
