package statuslimits

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
)

// MaxWorkloadStatus is the most bytes of JSON of a template's
// status.workloadStatus, the clusters' statuses aggregated into one (the
// built-in aggregation or a customization's statusAggregation rule). The
// template also carries the clusters' statuses themselves (within
// AggregatedStatusBudget) and its manifest; a quarter of that budget keeps
// the whole well inside the 1.5 MiB etcd stores, however many clusters
// report or whatever a rule builds from them (a rule of two nested maps over
// a dozen 15 KiB statuses builds 2 MiB within its cost limit).
const MaxWorkloadStatus = AggregatedStatusBudget / 4

// WorkloadStatus bounds an aggregated status before the hub writes it into
// a template: raw itself when it has at most MaxWorkloadStatus bytes, else
// the LeftOut stand-in saying how large it was, with that note ("" when raw
// is kept). A cut aggregate would not be JSON, and a partial one could read
// as a different state: it is replaced whole.
func WorkloadStatus(raw *runtime.RawExtension) (*runtime.RawExtension, string) {
	if raw == nil || len(raw.Raw) <= MaxWorkloadStatus {
		return raw, ""
	}
	note := fmt.Sprintf("aggregated status left out: %d bytes, over the limit of %d bytes", len(raw.Raw), MaxWorkloadStatus)
	return LeftOut(note), note
}

// LeftOutNote is the note of a LeftOut stand-in status, "" when fields is
// not one (a reported status whose only field is LeftOutField, a string).
// The aggregation names such a cluster rather than reading its stand-in as
// the workload's status.
func LeftOutNote(fields map[string]any) string {
	if len(fields) != 1 {
		return ""
	}
	note, _ := fields[LeftOutField].(string)
	return note
}
