package manifeststest

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	cliflag "k8s.io/component-base/cli/flag"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"

	agentapp "github.com/flotilla-io/flotilla/agent/app"
	hubapp "github.com/flotilla-io/flotilla/hub/app"
	"github.com/flotilla-io/flotilla/pkg/cmdutil"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
)

// The kustomizations users apply (docs/install.md).
const (
	hubKustomization            = "kustomize/hub"
	hubDNSKustomization         = "kustomize/hub-dns-traffic"
	hubDNSEndpointKustomization = "kustomize/hub-dns-endpoint"
	agentOverlayGlob            = "kustomize/agent/overlays/*/kustomization.yaml"
	hubDeploymentName           = "flotilla-hub"
	agentDeploymentName         = "flotilla-agent"
	dnsProbeDaemonSetName       = "flotilla-dns-probe"
	agentOverlayForClusters     = "member1"
)

// binary describes one of the two binaries the image ships.
type binary struct {
	name    string
	command []string // the container command (the image, hack/image: /hub, /agent)
	newCmd  func() *cobra.Command
	// validate parses args into the binary's Options and runs its Validate.
	validate func(args []string) error
}

var (
	hub = binary{name: "hub", command: []string{"/hub"}, newCmd: hubapp.NewHubCommand,
		validate: func(args []string) error {
			opts := hubapp.NewOptions()
			return parseAndValidate(args, opts.AddFlags, opts.Validate)
		}}
	agent = binary{name: "agent", command: []string{"/agent"}, newCmd: agentapp.NewAgentCommand,
		validate: func(args []string) error {
			opts := agentapp.NewOptions()
			return parseAndValidate(args, opts.AddFlags, opts.Validate)
		}}
	// The agent's probe-only mode, a subcommand of the same binary.
	dnsProbe = binary{name: "agent dns-probe", command: []string{"/agent", "dns-probe"}, newCmd: agentapp.NewDNSProbeCommand,
		validate: func(args []string) error {
			opts := agentapp.NewOptions()
			return parseAndValidate(args, opts.AddDNSProbeFlags, opts.ValidateDNSProbe)
		}}
)

// parseAndValidate registers flags as the binaries' New*Command do, parses
// args and validates the result.
func parseAndValidate(args []string, add func(*pflag.FlagSet), validate func() error) error {
	fs := pflag.NewFlagSet("manifest", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	add(fs)
	cmdutil.AddKlogFlags(fs)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return validate()
}

func TestHubDeploymentFlagsAndPorts(t *testing.T) {
	for _, dir := range []string{hubKustomization, hubDNSKustomization, hubDNSEndpointKustomization} {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			d := &appsv1.Deployment{}
			get(t, objs, "Deployment", hubDeploymentName, d)
			c := onlyContainer(t, &d.Spec.Template.Spec)
			flags := checkContainer(t, hub, c, d.Namespace)
			checkProbes(t, c, flags)
			checkService(t, objs, "flotilla-hub-metrics", d.Spec.Template.Labels, c, flags, "metrics-bind-address")
			if dir == hubDNSKustomization {
				if flags.Lookup("dns-traffic-address").Value.String() == "" {
					t.Errorf("%s does not set --dns-traffic-address", dir)
				}
				checkService(t, objs, "flotilla-hub-dns", d.Spec.Template.Labels, c, flags, "dns-traffic-address")
			}
			if dir == hubDNSEndpointKustomization {
				checkDNSEndpointPublishing(t, objs, flags.Lookup("dns-endpoint-publishing").Value.String(), d.Namespace)
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
				t.Errorf("hub Deployment: want at least 2 replicas (a standby), got %v", d.Spec.Replicas)
			}
			if v := flags.Lookup("leader-elect").Value.String(); v != "true" {
				t.Errorf("hub Deployment runs several replicas with --leader-elect=%s", v)
			}
			checkHardened(t, &d.Spec.Template.Spec, c)
		})
	}
}

// The leader-capable pods: a Deployment of at least two replicas, spread over
// nodes, leader-elected, the only pods with the hub kubeconfig (and the works
// role, TestAgentRBACCoversItsOwnWork), not probing DNS themselves (the
// DaemonSet does: one writer per verdict Lease).
func TestAgentDeploymentFlagsAndPorts(t *testing.T) {
	for _, dir := range agentOverlays(t) {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			d := &appsv1.Deployment{}
			get(t, objs, "Deployment", agentDeploymentName, d)
			pod := &d.Spec.Template.Spec
			c := onlyContainer(t, pod)
			flags := checkContainer(t, agent, c, d.Namespace)
			checkProbes(t, c, flags)
			checkHardened(t, pod, c)
			// The overlay's name is the cluster's name.
			if want, got := filepath.Base(dir), flags.Lookup("cluster-name").Value.String(); got != want {
				t.Errorf("overlay %s sets --cluster-name=%q, want %q", dir, got, want)
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
				t.Errorf("agent Deployment: want at least 2 replicas (a standby), got %v", d.Spec.Replicas)
			}
			if v := flags.Lookup("leader-elect").Value.String(); v != "true" {
				t.Errorf("agent Deployment runs several replicas with --leader-elect=%s", v)
			}
			if v := flags.Lookup("dns-probe").Value.String(); v != "false" {
				t.Errorf("agent Deployment runs with --dns-probe=%s: its node's verdict Lease would have two writers (the DaemonSet probes every node)", v)
			}
			// Apart when the member has the nodes, together when it has one:
			// a preferred (never required) anti-affinity on the hostname, so
			// no pod stays Pending on a one-node member.
			aa := pod.Affinity
			if aa == nil || aa.PodAntiAffinity == nil || !slices.ContainsFunc(aa.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
				func(term corev1.WeightedPodAffinityTerm) bool {
					return term.Weight == 100 && term.PodAffinityTerm.TopologyKey == corev1.LabelHostname && term.PodAffinityTerm.LabelSelector != nil &&
						labelsMatch(term.PodAffinityTerm.LabelSelector.MatchLabels, d.Spec.Template.Labels)
				}) {
				t.Errorf("agent Deployment: no preferred (weight 100) pod anti-affinity on %s selecting its own pods", corev1.LabelHostname)
			}
			if aa != nil && aa.PodAntiAffinity != nil && len(aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
				t.Errorf("agent Deployment: required pod anti-affinity %+v: on a member with one node a pod stays Pending and a rollout never completes",
					aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
			}
			// A rollout replaces one pod at a time in place: never a third pod
			// with the hub token, the replacement gets the node the old pod
			// left, and it completes on one node (maxUnavailable 1 makes room).
			if st := d.Spec.Strategy; st.RollingUpdate == nil || st.RollingUpdate.MaxSurge == nil || st.RollingUpdate.MaxSurge.IntValue() != 0 ||
				st.RollingUpdate.MaxUnavailable == nil || st.RollingUpdate.MaxUnavailable.IntValue() != 1 {
				t.Errorf("agent Deployment: want a rolling update with maxSurge 0 and maxUnavailable 1, got %+v", st)
			}
			// Only the apiserver's default not-ready/unreachable tolerations.
			if len(pod.Tolerations) > 0 {
				t.Errorf("agent Deployment tolerates %v: it should get only the default not-ready/unreachable tolerations", pod.Tolerations)
			}
			pdb := &policyv1.PodDisruptionBudget{}
			get(t, objs, "PodDisruptionBudget", agentDeploymentName, pdb)
			if pdb.Namespace != d.Namespace || pdb.Spec.Selector == nil || !labelsMatch(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
				t.Errorf("PodDisruptionBudget %s/%s does not select the agent pods", pdb.Namespace, pdb.Name)
			}
			// --hub-kubeconfig is a file in a mounted Secret the overlay generates.
			checkHubKubeconfigMount(t, objs, pod, c, flags.Lookup("hub-kubeconfig").Value.String())
		})
	}
}

// dnsProbeTolerations are the taints the DNS probe DaemonSet tolerates,
// exactly (docs/agent.md, "Where the pods run"): control-plane nodes and the
// node-condition taints the DaemonSet controller adds to every DaemonSet pod
// anyway. Not "operator: Exists" without a key (every taint).
var dnsProbeTolerations = []corev1.Toleration{
	{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// The per-node DNS probe: `agent dns-probe` with valid flags, publishing
// where the leader reads, under its own ServiceAccount, with no Secret
// mounted (its only credential is its pod-bound token) and exactly the
// documented tolerations.
func TestDNSProbeDaemonSet(t *testing.T) {
	for _, dir := range agentOverlays(t) {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			ds := &appsv1.DaemonSet{}
			get(t, objs, "DaemonSet", dnsProbeDaemonSetName, ds)
			pod := &ds.Spec.Template.Spec
			c := onlyContainer(t, pod)
			flags := checkContainer(t, dnsProbe, c, ds.Namespace)
			checkProbes(t, c, flags)
			checkHardened(t, pod, c)

			d := &appsv1.Deployment{}
			get(t, objs, "Deployment", agentDeploymentName, d)
			leader := onlyContainer(t, &d.Spec.Template.Spec)
			leaderFlags := agent.newCmd().Flags()
			if err := leaderFlags.Parse(expandArgs(t, leader, d.Namespace)); err != nil {
				t.Fatal(err)
			}
			if got, want := flags.Lookup("namespace").Value.String(), leaderFlags.Lookup("leader-elect-resource-namespace").Value.String(); got != want {
				t.Errorf("the probe writes verdicts in %q, the leader reads them in %q", got, want)
			}
			for _, f := range []string{"cluster-domain", "dns-stale-threshold"} {
				if got, want := flags.Lookup(f).Value.String(), leaderFlags.Lookup(f).Value.String(); got != want {
					t.Errorf("--%s: the probe uses %q, the leader %q", f, got, want)
				}
			}

			if sa := pod.ServiceAccountName; sa != dnsProbeDaemonSetName || sa == d.Spec.Template.Spec.ServiceAccountName {
				t.Errorf("DNS probe runs as ServiceAccount %q, want its own %q", sa, dnsProbeDaemonSetName)
			}
			// No Secret of any kind: neither the hub kubeconfig nor another.
			for _, v := range pod.Volumes {
				if v.Secret != nil {
					t.Errorf("DNS probe mounts Secret %s (volume %s)", v.Secret.SecretName, v.Name)
				}
				if v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.Secret != nil }) {
					t.Errorf("DNS probe mounts a Secret through projected volume %s", v.Name)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					t.Errorf("DNS probe reads Secret %s into $%s", e.ValueFrom.SecretKeyRef.Name, e.Name)
				}
			}
			for _, e := range c.EnvFrom {
				if e.SecretRef != nil {
					t.Errorf("DNS probe reads Secret %s into its environment", e.SecretRef.Name)
				}
			}
			if pod.HostNetwork || pod.HostPID || pod.HostIPC {
				t.Errorf("DNS probe shares the host's namespaces")
			}
			if !slices.EqualFunc(pod.Tolerations, dnsProbeTolerations, func(a, b corev1.Toleration) bool {
				return a.Key == b.Key && a.Operator == b.Operator && a.Effect == b.Effect && a.Value == b.Value && a.TolerationSeconds == nil
			}) {
				t.Errorf("DNS probe tolerations:\n got %v\nwant %v (docs/agent.md)", pod.Tolerations, dnsProbeTolerations)
			}
		})
	}
}

// Kustomize stamps a namespace on kinds it does not know to be
// cluster-scoped (ValidatingAdmissionPolicy); the apiserver would drop it,
// but a rendered manifest should say what is applied.
func TestAgentClusterScopedObjectsHaveNoNamespace(t *testing.T) {
	objs := render(t, filepath.Join("kustomize/agent/overlays", agentOverlayForClusters))
	clusterScoped := []string{"Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
	seen := map[string]bool{}
	for _, o := range objs {
		if slices.Contains(clusterScoped, o.GetKind()) {
			seen[o.GetKind()] = true
			if o.GetNamespace() != "" {
				t.Errorf("%s %s has namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
			}
		}
	}
	for _, kind := range clusterScoped {
		if !seen[kind] {
			t.Errorf("no %s rendered", kind)
		}
	}
}

// The cluster-lifecycle controller grants every agent rules on the hub; the
// apiserver lets it only if the hub holds them itself (no escalate/bind).
func TestHubRBACCoversWhatItGrantsAgents(t *testing.T) {
	objs := render(t, hubKustomization)
	d := &appsv1.Deployment{}
	get(t, objs, "Deployment", hubDeploymentName, d)
	sa := d.Spec.Template.Spec.ServiceAccountName
	const cluster = "member1"
	ns := clusterlifecycle.Namespace(cluster)
	granted := append(clusterlifecycle.AgentNamespaceRules(cluster), clusterlifecycle.AgentClusterRules(cluster)...)
	for _, where := range []string{ns} {
		if ok, missing := rbacvalidation.Covers(boundRules(t, objs, d.Namespace, sa, where), granted); !ok {
			t.Errorf("the hub (ServiceAccount %s/%s) cannot grant agents in %q what clusterlifecycle grants them; missing: %v",
				d.Namespace, sa, where, missing)
		}
	}
	if held := boundRules(t, objs, d.Namespace, sa, ns); slices.ContainsFunc(held, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Verbs, "escalate") || slices.Contains(r.Verbs, "bind") || slices.Contains(r.Verbs, "*")
	}) {
		t.Errorf("the hub holds escalate, bind or *: it should hold the rules it grants instead")
	}
	// Its own leader election.
	leaderNS := d.Namespace
	if ok, missing := rbacvalidation.Covers(boundRules(t, objs, d.Namespace, sa, leaderNS),
		[]rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}}); !ok {
		t.Errorf("the hub cannot run leader election in %s: missing %v", leaderNS, missing)
	}
}

// The agent's own needs in the member (the Works applier's rights are
// deliberately broad; see manifests/agent/rbac.yaml).
func TestAgentRBACCoversItsOwnWork(t *testing.T) {
	objs := render(t, filepath.Join("kustomize/agent/overlays", agentOverlayForClusters))
	d := &appsv1.Deployment{}
	get(t, objs, "Deployment", agentDeploymentName, d)
	sa := d.Spec.Template.Spec.ServiceAccountName
	for where, rules := range map[string][]rbacv1.PolicyRule{
		// Leader election and the nodes' DNS verdicts (read by an informer).
		d.Namespace: {{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update"}}},
		// Node and resource summaries, the identity check, Works' namespaces.
		"": agentMemberRules,
	} {
		if ok, missing := rbacvalidation.Covers(boundRules(t, objs, d.Namespace, sa, where), rules); !ok {
			t.Errorf("the agent (ServiceAccount %s/%s) lacks in %q: %v", d.Namespace, sa, where, missing)
		}
	}
}

// agentMemberRules are a sample of what the leader needs member-wide,
// including the write role that only the leader-capable pods may hold.
var agentMemberRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{"kube-system"}, Verbs: []string{"get"}},
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create"}},
	{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
}

// The DNS probe's ServiceAccount holds exactly what `agent dns-probe` uses:
// no Secrets, no workloads, no list of Leases, no delete, nothing of the
// agent's member-wide role.
func TestDNSProbeRBACIsOnlyItsVerdict(t *testing.T) {
	objs := render(t, filepath.Join("kustomize/agent/overlays", agentOverlayForClusters))
	ds := &appsv1.DaemonSet{}
	get(t, objs, "DaemonSet", dnsProbeDaemonSetName, ds)
	sa := ds.Spec.Template.Spec.ServiceAccountName
	inNamespace := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}}
	clusterWide := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}}
	for where, needs := range map[string][]rbacv1.PolicyRule{
		ds.Namespace: append(slices.Clone(inNamespace), clusterWide...),
		"":           clusterWide,
		"default":    clusterWide,
	} {
		held := boundRules(t, objs, ds.Namespace, sa, where)
		if ok, missing := rbacvalidation.Covers(held, needs); !ok {
			t.Errorf("the DNS probe (ServiceAccount %s/%s) lacks in %q: %v", ds.Namespace, sa, where, missing)
		}
		if ok, extra := rbacvalidation.Covers(needs, held); !ok {
			t.Errorf("the DNS probe (ServiceAccount %s/%s) holds more than it needs in %q: %v", ds.Namespace, sa, where, extra)
		}
	}
	for _, rule := range append(agentMemberRules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}) {
		if ok, _ := rbacvalidation.Covers(boundRules(t, objs, ds.Namespace, sa, ds.Namespace), []rbacv1.PolicyRule{rule}); ok {
			t.Errorf("the DNS probe holds %v", rule)
		}
	}
}

// checkContainer checks the container's command and every flag in its args
// against the binary, and returns the binary's flags parsed from them.
func checkContainer(t *testing.T, bin binary, c *corev1.Container, namespace string) *pflag.FlagSet {
	t.Helper()
	if !slices.Equal(c.Command, bin.command) {
		t.Errorf("container %s: command %q, want %q (the image's binary)", c.Name, c.Command, bin.command)
	}
	args := expandArgs(t, c, namespace)
	seen := map[string]bool{}
	for _, arg := range args {
		name, value, hasValue := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if !strings.HasPrefix(arg, "--") || name == "" {
			t.Errorf("container %s: argument %q is not a --flag (write --name=value)", c.Name, arg)
			continue
		}
		fresh := bin.newCmd().Flags()
		f := fresh.Lookup(name)
		if f == nil {
			t.Errorf("container %s: --%s is not a flag of %s", c.Name, name, bin.name)
			continue
		}
		if seen[f.Name] && !strings.Contains(f.Value.Type(), "Slice") {
			t.Errorf("container %s: --%s given twice (the last one wins silently)", c.Name, name)
		}
		seen[f.Name] = true
		if !hasValue {
			if f.NoOptDefVal == "" {
				t.Errorf("container %s: --%s needs a value (write --%s=value)", c.Name, name, name)
			}
			continue
		}
		if err := fresh.Set(name, value); err != nil {
			t.Errorf("container %s: --%s=%s does not parse: %v", c.Name, name, value, err)
		}
	}
	cmd := bin.newCmd()
	cmd.Flags().SetOutput(io.Discard)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatalf("container %s: %s does not accept its arguments %q: %v", c.Name, bin.name, args, err)
	}
	if err := bin.validate(args); err != nil {
		t.Errorf("container %s: %s rejects its arguments %q: %v", c.Name, bin.name, args, err)
	}
	return cmd.Flags()
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandArgs resolves $(VAR) references as the kubelet does, from the
// container's env; an undefined variable would stay literal, so it fails.
func expandArgs(t *testing.T, c *corev1.Container, namespace string) []string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = namespace
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName":
			env[e.Name] = "node-1"
		case e.ValueFrom.FieldRef != nil:
			env[e.Name] = "x"
		}
	}
	out := make([]string, 0, len(c.Args))
	for _, arg := range c.Args {
		out = append(out, varRef.ReplaceAllStringFunc(arg, func(ref string) string {
			name := varRef.FindStringSubmatch(ref)[1]
			v, ok := env[name]
			if !ok {
				t.Errorf("container %s: %q refers to $(%s), which is not in its env", c.Name, arg, name)
			}
			return v
		}))
	}
	return out
}

// checkProbes: liveness on /healthz and readiness on /readyz, both on the
// port --health-probe-bind-address opens.
func checkProbes(t *testing.T, c *corev1.Container, flags *pflag.FlagSet) {
	t.Helper()
	health := flagPort(t, flags, "health-probe-bind-address")
	for _, p := range []struct {
		kind, path string
		probe      *corev1.Probe
	}{{"liveness", "/healthz", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("container %s: no HTTP %s probe", c.Name, p.kind)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("container %s: %s probe on %s, want %s", c.Name, p.kind, p.probe.HTTPGet.Path, p.path)
		}
		if port := containerPort(t, c, p.probe.HTTPGet.Port, corev1.ProtocolTCP); port != health {
			t.Errorf("container %s: %s probe on port %d, but --health-probe-bind-address=%s", c.Name, p.kind, port,
				flags.Lookup("health-probe-bind-address").Value)
		}
	}
}

// checkService: the Service selects the pods and each of its target ports
// is the port the flag opens, with the right protocol.
func checkService(t *testing.T, objs []*unstructured.Unstructured, name string, podLabels map[string]string, c *corev1.Container, flags *pflag.FlagSet, flag string) {
	t.Helper()
	svc := &corev1.Service{}
	get(t, objs, "Service", name, svc)
	for k, v := range svc.Spec.Selector {
		if podLabels[k] != v {
			t.Errorf("Service %s selects %s=%s, which the pods do not carry", name, k, v)
		}
	}
	want := flagPort(t, flags, flag)
	for _, p := range svc.Spec.Ports {
		if got := containerPort(t, c, p.TargetPort, p.Protocol); got != want {
			t.Errorf("Service %s port %s targets container port %d, but --%s=%s", name, p.Name, got, flag, flags.Lookup(flag).Value)
		}
	}
}

// checkHardened: the pod security the manifests promise (docs/install.md).
func checkHardened(t *testing.T, pod *corev1.PodSpec, c *corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	psc := pod.SecurityContext
	switch {
	case sc == nil || psc == nil:
		t.Errorf("container %s: no security context", c.Name)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("container %s: root filesystem not read-only", c.Name)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("container %s: privilege escalation allowed", c.Name)
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("container %s: capabilities not dropped", c.Name)
	case psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532:
		t.Errorf("container %s: not running as the image's non-root user 65532", c.Name)
	case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("container %s: no RuntimeDefault seccomp profile", c.Name)
	}
	if c.Resources.Requests == nil || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("container %s: want resource requests and a memory limit", c.Name)
	}
}

func checkHubKubeconfigMount(t *testing.T, objs []*unstructured.Unstructured, pod *corev1.PodSpec, c *corev1.Container, path string) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if filepath.Dir(path) != filepath.Clean(m.MountPath) {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			s := &corev1.Secret{}
			get(t, objs, "Secret", v.Secret.SecretName, s)
			if _, ok := s.Data[filepath.Base(path)]; !ok {
				t.Errorf("Secret %s has no key %s for --hub-kubeconfig=%s", s.Name, filepath.Base(path), path)
			}
			return
		}
	}
	t.Errorf("--hub-kubeconfig=%s is not in a mounted Secret", path)
}

// boundRules are the rules the ServiceAccount holds in namespace ns ("" =
// cluster-wide only) through the rendered bindings.
func boundRules(t *testing.T, objs []*unstructured.Unstructured, saNamespace, saName, ns string) []rbacv1.PolicyRule {
	t.Helper()
	isSubject := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == saName && s.Namespace == saNamespace
		})
	}
	roleRules := func(kind, namespace, name string) []rbacv1.PolicyRule {
		if kind == "ClusterRole" {
			r := &rbacv1.ClusterRole{}
			get(t, objs, kind, name, r)
			return r.Rules
		}
		for _, o := range objs {
			if o.GetKind() == "Role" && o.GetName() == name && o.GetNamespace() == namespace {
				r := &rbacv1.Role{}
				convert(t, o, r)
				return r.Rules
			}
		}
		t.Fatalf("no Role %s/%s rendered", namespace, name)
		return nil
	}
	var rules []rbacv1.PolicyRule
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{}
			convert(t, o, b)
			if isSubject(b.Subjects) {
				rules = append(rules, roleRules(b.RoleRef.Kind, "", b.RoleRef.Name)...)
			}
		case "RoleBinding":
			b := &rbacv1.RoleBinding{}
			convert(t, o, b)
			if ns != "" && b.Namespace == ns && isSubject(b.Subjects) {
				rules = append(rules, roleRules(b.RoleRef.Kind, b.Namespace, b.RoleRef.Name)...)
			}
		}
	}
	return rules
}

func flagPort(t *testing.T, flags *pflag.FlagSet, name string) int32 {
	t.Helper()
	addr := flags.Lookup(name).Value.String()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("--%s=%s: %v", name, addr, err)
	}
	n, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		t.Fatalf("--%s=%s: %v", name, addr, err)
	}
	return int32(n)
}

// containerPort resolves a probe's or Service's port (a number or a
// container port's name) to a container port number.
func containerPort(t *testing.T, c *corev1.Container, port intstr.IntOrString, protocol corev1.Protocol) int32 {
	t.Helper()
	if protocol == "" {
		protocol = corev1.ProtocolTCP
	}
	for _, p := range c.Ports {
		pp := p.Protocol
		if pp == "" {
			pp = corev1.ProtocolTCP
		}
		if pp != protocol {
			continue
		}
		if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
			return p.ContainerPort
		}
	}
	t.Errorf("container %s declares no %s port %s", c.Name, protocol, port.String())
	return -1
}

// labelsMatch: selector is not empty and every label of it is on the pods.
func labelsMatch(selector, podLabels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if podLabels[k] != v {
			return false
		}
	}
	return true
}

func onlyContainer(t *testing.T, pod *corev1.PodSpec) *corev1.Container {
	t.Helper()
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Containers))
	}
	return &pod.Containers[0]
}

func agentOverlays(t *testing.T) []string {
	t.Helper()
	root := renderRoot(t)
	matches, err := filepath.Glob(filepath.Join(root, agentOverlayGlob))
	if err != nil || len(matches) == 0 {
		t.Fatalf("no agent overlays (%s): %v", agentOverlayGlob, err)
	}
	var dirs []string
	for _, m := range matches {
		rel, _ := filepath.Rel(root, filepath.Dir(m))
		dirs = append(dirs, rel)
	}
	return dirs
}

func get(t *testing.T, objs []*unstructured.Unstructured, kind, name string, into any) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			convert(t, o, into)
			return
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
}

func convert(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

// render runs `bin/kubectl kustomize dir` (dir relative to the repository)
// on the repository's KustomizeTree.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	kubectl := filepath.Join(repoRoot(t), "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Skipf("%s missing (run `make tools`): cannot render %s, so manifests and binaries are NOT checked against each other", kubectl, dir)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", filepath.Join(renderRoot(t), dir))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("kubectl kustomize %s: %v", dir, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// checkDNSEndpointPublishing: kustomize/hub-dns-endpoint turns the flag on
// and brings what it needs: the DNSEndpoint CRD, and a ClusterRole bound to
// the hub's ServiceAccount with exactly the verbs the publisher uses on
// dnsendpoints (pkg/hub/dnsendpoint) and nothing else.
func checkDNSEndpointPublishing(t *testing.T, objs []*unstructured.Unstructured, flag, namespace string) {
	t.Helper()
	if flag != "true" {
		t.Errorf("%s: --dns-endpoint-publishing=%s", hubDNSEndpointKustomization, flag)
	}
	crd := &unstructured.Unstructured{}
	get(t, objs, "CustomResourceDefinition", "dnsendpoints.externaldns.k8s.io", crd)
	role := &rbacv1.ClusterRole{}
	get(t, objs, "ClusterRole", "flotilla:hub:dns-endpoint", role)
	want := []rbacv1.PolicyRule{{APIGroups: []string{"externaldns.k8s.io"}, Resources: []string{"dnsendpoints"},
		Verbs: []string{"list", "watch", "create", "update", "delete"}}}
	if !slices.EqualFunc(role.Rules, want, func(a, b rbacv1.PolicyRule) bool {
		return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs) &&
			len(a.ResourceNames) == 0 && len(a.NonResourceURLs) == 0
	}) {
		t.Errorf("ClusterRole flotilla:hub:dns-endpoint: rules %+v, want %+v", role.Rules, want)
	}
	binding := &rbacv1.ClusterRoleBinding{}
	get(t, objs, "ClusterRoleBinding", "flotilla:hub:dns-endpoint", binding)
	if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" ||
		binding.Subjects[0].Name != hubDeploymentName || binding.Subjects[0].Namespace != namespace {
		t.Errorf("ClusterRoleBinding flotilla:hub:dns-endpoint: %+v, want the role bound to %s/%s only", binding, namespace, hubDeploymentName)
	}
	policy := &unstructured.Unstructured{}
	get(t, objs, "ValidatingAdmissionPolicyBinding", "flotilla-hub-dns-endpoints", policy)
}
