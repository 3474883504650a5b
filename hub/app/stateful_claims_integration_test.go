package app_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/statepreservation"
)

// Issue 30 item 6: carried state is a claim, not a fact. A compromised
// member1 reports its Flink job with a checkpoint path on storage of its
// own, then fails (a NoExecute taint). The policy constrains the values
// (valuePattern): the job id, which matches, is carried to member2's copy;
// the checkpoint path is not, a Warning event says why on the binding and
// the template, and the eviction task's message (and the failover history
// item made from it) says so on the binding.
func TestStatefulFailoverCarriesOnlyValuesThePolicyAllows(t *testing.T) {
	t.Parallel()
	ctx, fc, kube := spStartHub(t, "member1", "member2")
	const jobLabel = "flink.example.io/job-id"
	policy := &policyv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "flink", Namespace: "default"},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "flink.example.io/v1beta1", Kind: spFlinkKind, Name: spFlinkName}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity:   &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"member1", "member2"}},
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 1, MaxGroups: 1}},
			},
			Failover: &policyv1alpha1.FailoverBehavior{Cluster: &policyv1alpha1.ClusterFailoverBehavior{
				StatePreservation: &policyv1alpha1.StatePreservation{Rules: []policyv1alpha1.StatePreservationRule{
					{AliasLabelName: spCkptLabel, JSONPath: "{.jobStatus.checkpointPath}", ValuePattern: `s3://flink/checkpoints/wordcount/chk-[0-9]+`},
					{AliasLabelName: jobLabel, JSONPath: "{.jobStatus.jobId}", ValuePattern: `[0-9a-f]{16}`},
				}},
			}},
		}}
	spCreate(t, ctx, fc, policy, rtOf("default", spFlinkName, spFlinkManifest(2)))
	spClusters(t, ctx, fc, spFlinkRB, "member1")
	const stolen = "s3://member1-exfil/loot"
	status := `{"jobStatus":{"state":"RUNNING","jobId":"b4a9e9c0c7a54e0d","checkpointPath":"` + stolen + `"}}`
	spReport(t, ctx, fc, "member1", spFlinkRB, spFlinkGroup, spFlinkKind, spFlinkName, status, workv1alpha1.ResourceHealthy)
	spWaitSeen(t, ctx, fc, spFlinkRB, "member1", stolen, workv1alpha1.ResourceHealthy)

	spTaint(t, ctx, fc, "member1", corev1.TaintEffectNoExecute, true)
	spClusters(t, ctx, fc, spFlinkRB, "member2")
	rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, spFlinkRB, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rb.Spec.GracefulEvictionTasks) != 1 {
		t.Fatalf("eviction tasks %+v, want one", rb.Spec.GracefulEvictionTasks)
	}
	task := rb.Spec.GracefulEvictionTasks[0]
	if _, carried := task.PreservedLabelState[spCkptLabel]; carried || task.PreservedLabelState[jobLabel] != "b4a9e9c0c7a54e0d" {
		t.Fatalf("the task carries %v: want the job id only, not member1's checkpoint path", task.PreservedLabelState)
	}
	if !strings.Contains(task.Message, "state not carried") || !strings.Contains(task.Message, "does not match valuePattern") {
		t.Fatalf("the task's message %q does not say the checkpoint path was not carried", task.Message)
	}
	w2 := spWaitLabel(t, ctx, fc, "member2", spFlinkRB, jobLabel, "b4a9e9c0c7a54e0d")
	if m := manifestOf(t, w2); m.GetAnnotations()[spCkptLabel] != "" || m.GetLabels()[spCkptLabel] != "" {
		t.Fatalf("member2's copy carries member1's checkpoint claim: labels %v annotations %v", m.GetLabels(), m.GetAnnotations())
	}
	for _, obj := range []struct{ kind, name string }{{"ResourceBinding", spFlinkRB}, {"ResourceTemplate", spFlinkName}} {
		spWaitEvent(t, kube, obj.kind, obj.name, statepreservation.EventStatePreservationFailed, spCkptLabel, "does not match valuePattern")
	}
	waitUntil(t, "the failover history item says the checkpoint path was not carried", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings("default").Get(ctx, spFlinkRB, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, h := range rb.Status.FailoverHistory {
			if h.OriginCluster == "member1" && strings.Contains(h.Message, "does not match valuePattern") {
				return true, nil
			}
		}
		return false, nil
	})
}
