package conformance

import (
	"encoding/json"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// Karmada collects the members' status into the resource template's
// .status; Flotilla writes the sum into the ResourceTemplate's
// status.workloadStatus (and each cluster's into aggregatedStatus).

// waitWorkloadStatus waits until the template's workloadStatus has every
// field of want.
func (c *tc) waitWorkloadStatus(template string, want map[string]int64) {
	c.t.Helper()
	var got map[string]any
	c.eventually(fmt.Sprintf("%s's workloadStatus %v", template, want), func() (bool, error) {
		rt, err := c.fc.WorkV1alpha1().ResourceTemplates(c.ns).Get(c.ctx, template, metav1.GetOptions{})
		if err != nil || rt.Status.WorkloadStatus == nil {
			return false, err
		}
		if err := json.Unmarshal(rt.Status.WorkloadStatus.Raw, &got); err != nil {
			return false, err
		}
		for k, v := range want {
			if n, ok := got[k].(float64); !ok || int64(n) != v {
				return false, fmt.Errorf("workloadStatus %v", got)
			}
		}
		return true, nil
	})
}

// replicatedStatusCase is Karmada's Deployment and StatefulSet status
// collection: the object on every member (Duplicated), the sum of their
// replicas in the template's status, and again after a replica change.
func replicatedStatusCase(t *testing.T, obj map[string]any) {
	c := newCase(t)
	members := c.simClusters(2)
	u := &unstructured.Unstructured{Object: obj}
	c.policy(u.GetName(), policyv1alpha1.PropagationSpec{ResourceSelectors: selector(u.GetAPIVersion(), u.GetKind(), u.GetName()),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members...)}})
	c.template(obj)
	all := func(n int64) map[string]int64 {
		return map[string]int64{"replicas": n, "readyReplicas": n, "availableReplicas": n, "updatedReplicas": n}
	}
	c.waitWorkloadStatus(u.GetName(), all(6))
	c.updateTemplate(u.GetName(), setReplicas(4))
	c.waitWorkloadStatus(u.GetName(), all(8))
}

// Karmada: test/e2e/suites/base/resource_test.go, Context("DeploymentStatus
// collection testing"), It("deployment status collection testing").
func TestKarmada_StatusCollection_Deployment(t *testing.T) {
	replicatedStatusCase(t, deployment("nginx", 3))
}

// Karmada: resource_test.go, Context("StatefulSetStatus collection
// testing"), It("statefulSet status collection testing").
func TestKarmada_StatusCollection_StatefulSet(t *testing.T) {
	sts := deployment("web", 3)
	sts["kind"] = "StatefulSet"
	sts["spec"].(map[string]any)["serviceName"] = "web"
	replicatedStatusCase(t, sts)
}

// Karmada: resource_test.go, Context("JobStatus collection testing"),
// It("job status collection testing"): each member's Job succeeded; the
// template's status counts them all.
func TestKarmada_StatusCollection_Job(t *testing.T) {
	c := newCase(t)
	members := c.clusters("man", clusterSpec{}, clusterSpec{})
	c.policy("pi", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("batch/v1", "Job", "pi"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members...)}})
	binding := c.template(map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "pi"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never",
			"containers": []any{map[string]any{"name": "pi", "image": "perl:5.34.0"}}}}}})
	for _, m := range members {
		c.reportStatus(m, binding, workv1alpha1.ResourceHealthy, func(*unstructured.Unstructured) string {
			return `{"succeeded":1,"active":0,"failed":0}`
		})
	}
	c.waitWorkloadStatus("pi", map[string]int64{"succeeded": 2})
}

// Karmada: resource_test.go, Context("DaemonSetStatus collection testing"),
// It("daemonSet status collection testing").
func TestKarmada_StatusCollection_DaemonSet(t *testing.T) {
	c := newCase(t)
	members := c.clusters("man", clusterSpec{}, clusterSpec{})
	c.policy("ds", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "DaemonSet", "ds"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members...)}})
	d := deployment("ds", 0)
	d["kind"] = "DaemonSet"
	delete(d["spec"].(map[string]any), "replicas")
	binding := c.template(d)
	for _, m := range members {
		c.reportStatus(m, binding, workv1alpha1.ResourceHealthy, func(*unstructured.Unstructured) string {
			return `{"currentNumberScheduled":2,"desiredNumberScheduled":2,"numberAvailable":2,"numberMisscheduled":0,"numberReady":2,"updatedNumberScheduled":2,"observedGeneration":1}`
		})
	}
	c.waitWorkloadStatus("ds", map[string]int64{"currentNumberScheduled": 4, "desiredNumberScheduled": 4, "numberAvailable": 4, "numberReady": 4, "updatedNumberScheduled": 4})
}
