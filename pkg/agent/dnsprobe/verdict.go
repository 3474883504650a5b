package dnsprobe

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-io/flotilla/pkg/health"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// Each agent pod publishes its node's damped DNS verdict in the member
// cluster as a Lease in the agent's namespace, so a person can see it:
//
//	kubectl get leases -n flotilla-system -l dns.flotilla.io/verdict \
//	  -L dns.flotilla.io/status,dns.flotilla.io/reason
//
// spec.renewTime is when the verdict was last confirmed by a probe and
// spec.leaseDurationSeconds how long it stays fresh; the leader ignores a
// verdict whose renewTime is older than that (its agent is gone or stuck).
// Bounds on what a verdict Lease says (its writer is any probe pod).
const (
	maxNodeName       = 253
	maxVerdictMessage = 1024
)

const (
	// LabelVerdict marks a verdict Lease; its value is always "true".
	LabelVerdict = "dns.flotilla.io/verdict"
	// LabelStatus is the verdict: True, False or Unknown.
	LabelStatus = "dns.flotilla.io/status"
	// LabelReason is the verdict's reason (ServiceDomainNameResolved, …).
	LabelReason = "dns.flotilla.io/reason"
	// AnnotationNode names the node the verdict is for.
	AnnotationNode = "dns.flotilla.io/node"
	// AnnotationMessage is the verdict's message.
	AnnotationMessage = "dns.flotilla.io/message"
	// AnnotationServer is the resolver the pod asked.
	AnnotationServer = "dns.flotilla.io/server"
)

// VerdictLeaseName is the name of node's verdict Lease, hashed when the node
// name is too long to fit.
func VerdictLeaseName(node string) string {
	name := "flotilla-dns-" + node
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(node))
	// The cut must not end on a '.' or '-' that the hash's '-' would follow.
	prefix := strings.TrimRight(name[:validation.DNS1123SubdomainMaxLength-17], ".-")
	return prefix + "-" + hex.EncodeToString(sum[:8])
}

// Verdict is one node's published DNS verdict.
type Verdict struct {
	Node       string
	Observed   health.Observation
	RenewTime  time.Time
	StaleAfter time.Duration
}

// VerdictFromLease reads a verdict Lease; ok is false for a Lease that is not
// a well-formed verdict (it is then ignored, not trusted).
func VerdictFromLease(l *coordinationv1.Lease) (Verdict, bool) {
	if l.Labels[LabelVerdict] != "true" || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return Verdict{}, false
	}
	status := metav1.ConditionStatus(l.Labels[LabelStatus])
	switch status {
	case metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown:
	default:
		return Verdict{}, false
	}
	// A probe pod writes its own Lease: what it says is bounded before the
	// leader quotes it in the Cluster's condition.
	node := statuslimits.Text(l.Annotations[AnnotationNode], maxNodeName)
	if node == "" {
		node = l.Name
	}
	return Verdict{
		Node:       node,
		Observed:   health.Observation{Status: status, Reason: l.Labels[LabelReason], Message: statuslimits.Text(l.Annotations[AnnotationMessage], maxVerdictMessage)},
		RenewTime:  l.Spec.RenewTime.Time,
		StaleAfter: time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second,
	}, true
}
