package wrap

// Besides Karmada, `hub wrap` converts what maps from two other multi-cluster
// projects' rollouts: Open Cluster Management (--from-ocm: a
// ManifestWorkReplicaSet with its Placement, ocm.go) and KubeFleet
// (--from-kubefleet: a ClusterResourcePlacement with its
// ClusterStagedUpdateStrategy, kubefleet.go). Their objects refer to one
// another, so they are collected while the input is read and converted once
// all of it is known. Every field that does not map is reported
// (res.Unsupported) or, when it converts but behaves otherwise, noted
// (res.Notes), as for Karmada.
//
// The input is untrusted: each object is decoded strictly into a mirror of
// the fields hub wrap knows (unknown fields and fields of the wrong type are
// reported and dropped, dropRejected), values are checked against what
// Flotilla's CRDs accept before they are written, and the output is bounded
// by the API's limits (16 decision groups, 128 resource selectors, 64
// matchLabels and 32 matchExpressions per selector).

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// IsOCMGroup says whether group is one of Open Cluster Management's API
// groups.
func IsOCMGroup(group string) bool {
	return group == "open-cluster-management.io" || strings.HasSuffix(group, ".open-cluster-management.io")
}

// IsKubeFleetGroup says whether group is one of KubeFleet's API groups.
func IsKubeFleetGroup(group string) bool {
	return group == "kubernetes-fleet.io" || strings.HasSuffix(group, ".kubernetes-fleet.io")
}

// API limits of Flotilla's policies that a conversion must stay within
// (pkg/apis/policy/v1alpha1).
const (
	maxDecisionGroups    = 16
	maxResourceSelectors = 128
	maxMatchLabels       = 64
	maxMatchExpressions  = 32
	maxClusterNames      = 1024
)

// noProgressDeadline is written for a peer's "no deadline": Flotilla's
// progressDeadline has no unlimited value (unset is 10m).
var noProgressDeadline = 87600 * time.Hour

// peerObject is an OCM or KubeFleet object of the input. slot keeps its
// place in the output: the policy it becomes, or nothing.
type peerObject struct {
	sourced
	slot *unstructured.Unstructured
	// manifests are a ManifestWorkReplicaSet's manifests, wrapped as
	// templates like every native object.
	manifests []*pending
	used      bool // a Placement or strategy some converted object read
}

// collectPeer records an OCM or KubeFleet object (an error without its
// --from flag). A ManifestWorkReplicaSet's manifests become native objects
// on their way into templates, placed before the policy in the output.
func collectPeer(s sourced, opts Options, noted map[schema.GroupKind]bool, res *Result, natives *[]*pending) (*peerObject, error) {
	gvk := s.obj.GroupVersionKind()
	if IsOCMGroup(gvk.Group) && !opts.FromOCM {
		return nil, fmt.Errorf("%s: %s %s is an Open Cluster Management object; convert it with --from-ocm", s.src, gvk.Kind, s.obj.GetName())
	}
	if IsKubeFleetGroup(gvk.Group) && !opts.FromKubeFleet {
		return nil, fmt.Errorf("%s: %s %s is a KubeFleet object; convert it with --from-kubefleet", s.src, gvk.Kind, s.obj.GetName())
	}
	p := &peerObject{sourced: s}
	if gvk == ocmManifestWorkReplicaSet {
		manifests, err := mwrsManifests(s)
		if err != nil {
			return nil, err
		}
		for _, m := range manifests {
			np := &pending{sourced: m, namespaced: scopeOf(m.obj.GroupVersionKind(), opts, noted, res)}
			np.out = &unstructured.Unstructured{}
			res.Objects = append(res.Objects, np.out)
			*natives = append(*natives, np)
			p.manifests = append(p.manifests, np)
		}
	}
	p.slot = &unstructured.Unstructured{}
	res.Objects = append(res.Objects, p.slot)
	return p, nil
}

// convertPeers converts the collected objects once the whole input is
// known: first the objects others refer to are indexed, then each
// ManifestWorkReplicaSet and ClusterResourcePlacement becomes a policy, and
// what nothing used is reported.
func convertPeers(peers []*peerObject, natives []*pending, opts Options, noted map[schema.GroupKind]bool, res *Result) error {
	if len(peers) == 0 {
		return nil
	}
	var errs []error
	ocm := newOCMIndex(peers, opts)
	fleet, err := newFleetIndex(peers, natives, opts, noted, res)
	if err != nil {
		return err
	}
	for _, p := range peers {
		gvk := p.obj.GroupVersionKind()
		var err error
		switch {
		case gvk == ocmManifestWorkReplicaSet:
			err = convertMWRS(p, ocm, opts, res)
		case gvk.Group == fleetPlacementGroup && gvk.Kind == "ClusterResourcePlacement" && fleetPlacementVersions[gvk.Version]:
			err = convertCRP(p, fleet, res)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range peers {
		if IsOCMGroup(p.obj.GroupVersionKind().Group) {
			ocm.reportUnused(p, res)
		} else {
			fleet.reportUnused(p, res)
		}
	}
	return utilerrors.NewAggregate(errs)
}

// peerConv reports on one object of a peer project.
type peerConv struct {
	res       *Result
	desc, src string
	peer      string // "OCM" or "KubeFleet", in messages
}

func (c *peerConv) unsupported(path, format string, args ...any) {
	c.res.Unsupported = append(c.res.Unsupported, Finding{Object: c.desc, Path: path, Message: fmt.Sprintf(format, args...), Source: c.src})
}

func (c *peerConv) note(path, format string, args ...any) {
	differs(c.res, c.desc, path, c.src, fmt.Sprintf(format, args...))
}

// peerMeta lets a mirror type decode the parts of an object hub wrap does
// not convert field by field.
type peerMeta struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   json.RawMessage `json:"metadata"`
	Status     json.RawMessage `json:"status"`
}

// decodePeer decodes obj (a copy, which loses what is rejected) into the
// mirror type newInto makes, reporting every field the mirror rejects: a
// field hub wrap does not know, or one of the wrong type.
func decodePeer(obj map[string]any, newInto func() any, c *peerConv) (any, error) {
	rejected, err := dropRejected(obj, func() (any, error) { return newInto(), nil })
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.src, c.desc, err)
	}
	for _, r := range rejected {
		if r.typeError != "" {
			c.unsupported(r.path, "wrong type (%s), not converted", r.typeError)
		} else {
			c.unsupported(r.path, "not a field hub wrap converts from %s (none of Flotilla's), dropped", c.peer)
		}
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	into := newInto()
	if err := json.Unmarshal(data, into); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.src, c.desc, err)
	}
	return into, nil
}

// rawSet says whether a field decoded as raw JSON holds anything.
func rawSet(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null" && s != "{}" && s != "[]" && s != `""` && s != "false"
}

// checkSelector says what is wrong with a cluster label selector for
// Flotilla ("" when nothing): what metav1 refuses, or more matchLabels or
// matchExpressions than the CRD allows.
func checkSelector(ls *metav1.LabelSelector) string {
	if ls == nil {
		return ""
	}
	if len(ls.MatchLabels) > maxMatchLabels {
		return fmt.Sprintf("%d matchLabels, Flotilla allows at most %d", len(ls.MatchLabels), maxMatchLabels)
	}
	if len(ls.MatchExpressions) > maxMatchExpressions {
		return fmt.Sprintf("%d matchExpressions, Flotilla allows at most %d", len(ls.MatchExpressions), maxMatchExpressions)
	}
	if _, err := metav1.LabelSelectorAsSelector(ls); err != nil {
		return "not a valid label selector: " + err.Error()
	}
	return ""
}

// emptySelector says whether ls selects every object.
func emptySelector(ls *metav1.LabelSelector) bool {
	return ls == nil || len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0
}

// notePeerLabelKeys notes the keys of a cluster selector that the peer's
// own controllers set on its cluster objects: Flotilla's Clusters carry
// them only if someone labels them so.
func notePeerLabelKeys(c *peerConv, path string, ls *metav1.LabelSelector, isPeerGroup func(string) bool) {
	if ls == nil {
		return
	}
	keys := make([]string, 0, len(ls.MatchLabels)+len(ls.MatchExpressions))
	for k := range ls.MatchLabels {
		keys = append(keys, k)
	}
	for _, e := range ls.MatchExpressions {
		keys = append(keys, e.Key)
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		if prefix, _, ok := strings.Cut(k, "/"); ok && isPeerGroup(prefix) {
			c.note(path, "label %s is %s's: Flotilla's Clusters carry it only where someone labels them so", k, c.peer)
		}
	}
}

// maxConcurrencyPattern and maxFailuresPattern are the CRD's patterns for
// those fields' strings.
var (
	maxConcurrencyPattern = regexp.MustCompile(`^((100|[1-9][0-9]?)%|[1-9][0-9]*)$`)
	maxFailuresPattern    = regexp.MustCompile(`^((100|[0-9]{1,2})%|[0-9]+)$`)
)

// concurrency returns v as Flotilla's maxConcurrency (at least one
// cluster), or false.
func concurrency(v intstr.IntOrString) (*intstr.IntOrString, bool) {
	if v.Type == intstr.Int {
		return &v, v.IntVal >= 1
	}
	return &v, maxConcurrencyPattern.MatchString(v.StrVal)
}

// failures returns v as Flotilla's maxFailures, or false.
func failures(v intstr.IntOrString) (*intstr.IntOrString, bool) {
	if v.Type == intstr.Int {
		return &v, v.IntVal >= 0
	}
	return &v, maxFailuresPattern.MatchString(v.StrVal)
}

// isZero says whether an IntOrString is 0, "0%" or unset.
func isZero(v intstr.IntOrString) bool {
	if v.Type == intstr.Int {
		return v.IntVal == 0
	}
	return strings.TrimLeft(strings.TrimSuffix(v.StrVal, "%"), "0") == ""
}

// groupName turns a peer's group or stage name into Flotilla's (a DNS
// label other than "remaining"), and says whether it had to change; ""
// when it cannot.
func groupName(name string) (string, bool) {
	out := strings.Map(func(r rune) rune {
		switch {
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		case r == '_' || r == '.':
			return '-'
		}
		return r
	}, name)
	if len(validation.IsDNS1123Label(out)) > 0 || out == policyv1alpha1.RemainingGroupName {
		return "", false
	}
	return out, out != name
}

// policyObject is a converted policy: Flotilla's typed spec written as
// the unstructured object of the output, with the source's labels and
// annotations.
func policyObject(kind, namespace, name string, from *unstructured.Unstructured, spec *policyv1alpha1.PropagationSpec) (map[string]any, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var specMap map[string]any
	if err := utiljson.Unmarshal(data, &specMap); err != nil {
		return nil, err
	}
	// Zero values of non-pointer fields say nothing the defaults do not.
	if p, ok := specMap["placement"].(map[string]any); ok && len(p) == 0 {
		delete(specMap, "placement")
	}
	if rs, ok := specMap["rolloutStrategy"].(map[string]any); ok {
		for _, k := range []string{"progressive", "progressivePerGroup"} {
			if cfg, ok := rs[k].(map[string]any); ok && cfg["minSuccessTime"] == "0s" {
				delete(cfg, "minSuccessTime")
			}
		}
	}
	md := map[string]any{"name": name}
	if namespace != "" {
		md["namespace"] = namespace
	}
	if l := from.GetLabels(); len(l) > 0 {
		md["labels"] = stringMap(l)
	}
	if a := from.GetAnnotations(); len(a) > 0 {
		md["annotations"] = stringMap(a)
	}
	return map[string]any{
		"apiVersion": policyv1alpha1.SchemeGroupVersion.String(),
		"kind":       kind,
		"metadata":   md,
		"spec":       specMap,
	}, nil
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// selectorOf is the resource selector that names one wrapped object (by
// apiVersion, kind and name; the caller adds the namespace where needed).
func selectorOf(p *pending) policyv1alpha1.ResourceSelector {
	return policyv1alpha1.ResourceSelector{APIVersion: p.obj.GetAPIVersion(), Kind: p.obj.GetKind(), Name: p.obj.GetName()}
}

// templateNamespace is the namespace of p's template, as makeTemplates
// will decide it.
func templateNamespace(p *pending, opts Options) string {
	if !p.namespaced {
		return ""
	}
	if ns := p.obj.GetNamespace(); ns != "" {
		return ns
	}
	return opts.Namespace
}

// selectorList is a policy's resource selectors, without duplicates and
// at most as many as the API allows.
type selectorList struct {
	list []policyv1alpha1.ResourceSelector
	seen map[string]bool
}

// add adds rs unless it is there already; false when the list is full.
func (l *selectorList) add(rs policyv1alpha1.ResourceSelector) bool {
	ls, _ := json.Marshal(rs.LabelSelector)
	key := strings.Join([]string{rs.APIVersion, rs.Kind, rs.Namespace, rs.Name, string(ls)}, "\x00")
	if l.seen[key] {
		return true
	}
	if len(l.list) >= maxResourceSelectors {
		return false
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	l.seen[key] = true
	l.list = append(l.list, rs)
	return true
}

func (l *selectorList) full() bool { return len(l.list) >= maxResourceSelectors }

// durationString writes a duration as the output will (metav1.Duration).
func durationString(d time.Duration) string {
	return metav1.Duration{Duration: d}.Duration.String()
}
