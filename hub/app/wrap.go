package app

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/restmapper"

	"github.com/flotilla-io/flotilla/pkg/cmdutil"
	"github.com/flotilla-io/flotilla/pkg/wrap"
)

// wrapOptions are the flags of `hub wrap`.
type wrapOptions struct {
	filenames          []string
	recursive          bool
	namespace          string
	fromKarmada        bool
	fromOCM            bool
	fromKubeFleet      bool
	allowUnsupported   bool
	discovery          cmdutil.KubeconfigFlags
	clusterScopedKinds []string
}

// newWrapCommand is `hub wrap`: native manifests (and, with --from-karmada,
// --from-ocm or --from-kubefleet, those projects' policies) in, Flotilla
// objects out, for `kubectl apply -f -`.
func newWrapCommand() *cobra.Command {
	o := &wrapOptions{}
	cmd := &cobra.Command{
		Use:   "wrap -f FILENAME [-f FILENAME ...]",
		Short: "Wrap Kubernetes manifests into Flotilla ResourceTemplates (and convert Karmada, OCM and KubeFleet policies).",
		Long: `Reads Kubernetes objects (YAML or JSON, multi-document streams, List kinds,
directories of .yaml/.yml/.json files, or - for standard input) and writes a YAML
stream with each object inside a ResourceTemplate (namespaced kinds) or a
ClusterResourceTemplate (cluster-scoped kinds), ready for kubectl apply.
Flotilla objects pass through unchanged.

With --from-karmada, Karmada objects are converted as well: PropagationPolicy,
ClusterPropagationPolicy, OverridePolicy, ClusterOverridePolicy, ClusterTaintPolicy,
Remedy, Cluster, MultiClusterIngress and WorkloadRebalancer become their Flotilla
kinds (purgeMode Immediately/Graciously is written Directly/Gracefully).

With --from-ocm, an Open Cluster Management ManifestWorkReplicaSet becomes templates
of its manifests and a policy selecting them, placed by its Placement's label selector
and rolled out by its rolloutStrategy (All, Progressive, ProgressivePerGroup with the
Placement's decision groups). With --from-kubefleet, a KubeFleet
ClusterResourcePlacement becomes a ClusterPropagationPolicy: RollingUpdate becomes a
Progressive rollout, External the stages of its ClusterStagedUpdateStrategy as decision
groups.

Every field or object Flotilla does not support is reported on standard error with its
path, and nothing is written unless --allow-unsupported is given.

Nothing is written to standard output when there is an error. See docs/wrap.md.`,
		Example: `  hub wrap -f app.yaml | kubectl apply -f -
  hub wrap -R -f manifests/ -n shop > templates.yaml
  kubectl get deploy,svc -n shop -o yaml | hub wrap -f - | kubectl apply -f -
  hub wrap --from-karmada -f karmada-policies/ | kubectl apply -f -
  hub wrap --from-ocm -f mwrs.yaml -f placement.yaml | kubectl apply -f -
  hub wrap --from-kubefleet -f crp.yaml -f staged-strategy.yaml -f update-run.yaml | kubectl apply -f -`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWrap(o, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVarP(&o.filenames, "filename", "f", nil, "File, directory or - (standard input) to read; repeatable.")
	fs.BoolVarP(&o.recursive, "recursive", "R", false, "Read the directories given with -f recursively.")
	fs.StringVarP(&o.namespace, "namespace", "n", "default", "Namespace for templates (and converted namespaced policies) of objects that name none.")
	fs.BoolVar(&o.fromKarmada, "from-karmada", false, "Convert Karmada objects (policy.karmada.io, remedy.karmada.io, ...) to Flotilla's.")
	fs.BoolVar(&o.fromOCM, "from-ocm", false, "Convert Open Cluster Management objects (ManifestWorkReplicaSet with its Placement) to Flotilla's.")
	fs.BoolVar(&o.fromKubeFleet, "from-kubefleet", false, "Convert KubeFleet objects (ClusterResourcePlacement with its ClusterStagedUpdateStrategy) to Flotilla's.")
	fs.BoolVar(&o.allowUnsupported, "allow-unsupported", false, "With --from-karmada, --from-ocm or --from-kubefleet: write the output even though fields or objects Flotilla does not support were dropped (they are still reported).")
	// Not cmdutil.KubeconfigFlags.AddFlags: wrap is an offline converter and
	// asks a cluster only when told to, so its output does not change with
	// whatever KUBECONFIG happens to point at (or fail offline).
	fs.StringVar(&o.discovery.Kubeconfig, "kubeconfig", "", "Kubeconfig of a cluster to ask (discovery) whether kinds are namespaced; without it and --context, built-in tables decide.")
	fs.StringVar(&o.discovery.Context, "context", "", "Context to use for discovery; alone (without --kubeconfig) it is looked up as kubectl does, in KUBECONFIG, else ~/.kube/config.")
	fs.StringArrayVar(&o.clusterScopedKinds, "cluster-scoped-kind", nil, "Treat Kind.group (e.g. ClusterIssuer.cert-manager.io) as cluster-scoped; repeatable.")
	return cmd
}

// errUnsupported is returned after the unsupported fields were reported,
// so the exit code is non-zero.
var errUnsupported = errors.New("some of the input is not supported by Flotilla (listed above); nothing written; " +
	"rerun with --allow-unsupported to write the output without it")

func runWrap(o *wrapOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(o.filenames) == 0 {
		return fmt.Errorf("no input: give -f FILE, -f DIR or -f - (standard input)")
	}
	if o.allowUnsupported && !o.fromKarmada && !o.fromOCM && !o.fromKubeFleet {
		return fmt.Errorf("--allow-unsupported only applies with --from-karmada, --from-ocm or --from-kubefleet")
	}
	opts := wrap.Options{
		Namespace:          o.namespace,
		FromKarmada:        o.fromKarmada,
		FromOCM:            o.fromOCM,
		FromKubeFleet:      o.fromKubeFleet,
		ClusterScopedKinds: wrap.ParseClusterScopedKinds(o.clusterScopedKinds),
	}
	if o.discovery != (cmdutil.KubeconfigFlags{}) {
		scope, err := discoveryScope(o.discovery)
		if err != nil {
			return err
		}
		opts.Scope = scope
	}
	inputs, err := wrap.ReadInputs(o.filenames, o.recursive, stdin)
	if err != nil {
		return err
	}
	res, err := wrap.Wrap(inputs, opts)
	if err != nil {
		return err
	}
	for _, n := range res.Notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	for _, f := range res.Unsupported {
		fmt.Fprintln(stderr, "unsupported:", f)
	}
	if len(res.Unsupported) > 0 && !o.allowUnsupported {
		return errUnsupported
	}
	// The whole output is rendered before the first byte is written, so a
	// failure never leaves half a stream in a pipe to kubectl apply.
	out, err := res.YAML()
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

// discoveryScope asks the cluster of the kubeconfig which kinds are
// namespaced. Kinds it does not serve (often: the hub lacks the members'
// CRDs) fall back to the built-in tables.
func discoveryScope(kube cmdutil.KubeconfigFlags) (wrap.ScopeFunc, error) {
	cfg, err := kube.RestConfig(20, 40, "hub-wrap")
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig for discovery: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil && len(groups) == 0 {
		// A partial failure (one aggregated API down) still answers for
		// the rest; only a cluster that answers nothing is an error.
		return nil, fmt.Errorf("discovery on %s: %w", cfg.Host, err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	return func(gvk schema.GroupVersionKind) (bool, bool) {
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return false, false
		}
		return m.Scope.Name() == meta.RESTScopeNameNamespace, true
	}, nil
}
