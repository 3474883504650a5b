package detector

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Reasons of the template's WorkloadStatusIncomplete condition.
const (
	// ReasonAggregationFailed: the statusAggregation rule failed over the
	// clusters' statuses together and no subset of them succeeded (its
	// cost or time limit): workloadStatus is empty.
	ReasonAggregationFailed = "AggregationFailed"
	// ReasonWorkloadStatusTooLarge: the aggregate is larger than
	// statuslimits.MaxWorkloadStatus; workloadStatus is a stand-in saying
	// so.
	ReasonWorkloadStatusTooLarge = "WorkloadStatusTooLarge"
	// ReasonStatusesLeftOut: some clusters' statuses are not in
	// workloadStatus (not a counter, a status the rule fails on, over its
	// share of the budget); the message names them and why.
	ReasonStatusesLeftOut = "StatusesLeftOut"
)

// mirrorWorkloadStatus aggregates the binding's clusters' statuses into
// the template's workloadStatus and says with WorkloadStatusIncomplete
// (removed when there is nothing to say) what of them it does not hold.
func mirrorWorkloadStatus(interpreter *resourceinterpreter.Interpreter, status *workv1alpha1.ResourceTemplateStatus,
	binding *workv1alpha1.ResourceBinding, generation int64) {
	statuses := make([]resourceinterpreter.ClusterStatus, 0, len(binding.Status.AggregatedStatus))
	for _, item := range binding.Status.AggregatedStatus {
		if item.Status != nil {
			statuses = append(statuses, resourceinterpreter.ClusterStatus{ClusterName: item.ClusterName, Status: item.Status})
		}
	}
	agg := interpreter.AggregateStatus(schema.FromAPIVersionAndKind(binding.Spec.Resource.APIVersion, binding.Spec.Resource.Kind), statuses)
	status.WorkloadStatus = agg.Status
	if cond := workloadStatusIncomplete(agg, len(statuses), generation); cond != nil {
		meta.SetStatusCondition(&status.Conditions, *cond)
	} else {
		meta.RemoveStatusCondition(&status.Conditions, workobjects.TemplateConditionWorkloadStatusIncomplete)
	}
}

// workloadStatusIncomplete is the WorkloadStatusIncomplete condition for
// agg, an aggregate of reported statuses, nil when agg holds them all. The
// message is bounded (statuslimits.MaxSummary): every cluster's reason is,
// and the list ends "… and N more clusters".
func workloadStatusIncomplete(agg resourceinterpreter.Aggregate, reported int, generation int64) *metav1.Condition {
	var reason string
	var parts []string
	switch {
	case agg.Failed != "":
		reason = ReasonAggregationFailed
		parts = append(parts, "no aggregate of the clusters' statuses: "+statuslimits.Text(agg.Failed, statuslimits.MaxClusterMessage))
	case agg.TooLarge != "":
		reason = ReasonWorkloadStatusTooLarge
		parts = append(parts, agg.TooLarge)
	case len(agg.LeftOut) > 0:
		reason = ReasonStatusesLeftOut
	default:
		return nil
	}
	if len(agg.LeftOut) > 0 {
		items := make([]string, len(agg.LeftOut))
		for k, l := range agg.LeftOut {
			items[k] = l.ClusterName + ": " + l.Reason
		}
		head := fmt.Sprintf("the statuses of %d of %d clusters are left out of workloadStatus: ", len(agg.LeftOut), reported)
		if len(parts) > 0 {
			head = parts[0] + "; " + head
		}
		parts = []string{head + statuslimits.Join(items, "; ", statuslimits.MaxSummary-utf8.RuneCountInString(head), "clusters")}
	}
	return &metav1.Condition{Type: workobjects.TemplateConditionWorkloadStatusIncomplete, Status: metav1.ConditionTrue,
		Reason: reason, Message: statuslimits.Text(parts[0], statuslimits.MaxSummary), ObservedGeneration: generation}
}
