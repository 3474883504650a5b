// Package app holds the kubectl flotilla commands. Each view is built by a
// pure function from the hub's objects (clusters.go, where.go, explain.go)
// and printed as a kubectl-like table or as JSON/YAML of the same struct.
package app

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-io/flotilla/pkg/cmdutil"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/version"
)

// Options are the flags every command shares.
type Options struct {
	Kube cmdutil.KubeconfigFlags
	// Namespace is -n; empty means the context's namespace (as kubectl).
	Namespace string
	// HubNamespace is where the hub publishes the fleet guard's verdict
	// (its --leader-elect-resource-namespace).
	HubNamespace string
	// Output is "", "wide", "json" or "yaml".
	Output string

	Out, ErrOut io.Writer
	// Now is the clock ages are computed against (tests may fix it).
	Now func() time.Time
}

// clients are what a command talks to, with the namespace it works in.
type clients struct {
	kube      kubernetes.Interface
	flotilla  flotillaclient.Interface
	namespace string
}

func (o *Options) clients() (*clients, error) {
	cfg, err := o.Kube.RestConfig(50, 100, "kubectl-flotilla")
	if err != nil {
		return nil, err
	}
	ns := o.Namespace
	if ns == "" {
		// The context's namespace, "default" when it names none, or the
		// pod's in a cluster: what kubectl uses.
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = o.Kube.Kubeconfig
		// As cmdutil: no migration of ~/.kube/.kubeconfig (a write into
		// the user's home directory) from a read-only tool.
		rules.MigrationRules = nil
		ns, _, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
			&clientcmd.ConfigOverrides{CurrentContext: o.Kube.Context}).Namespace()
		if err != nil {
			return nil, err
		}
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	fc, err := flotillaclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{kube: kube, flotilla: fc, namespace: ns}, nil
}

// NewCommand is `kubectl flotilla`.
func NewCommand(out, errOut io.Writer) *cobra.Command {
	o := &Options{HubNamespace: "flotilla-system", Out: out, ErrOut: errOut, Now: time.Now}
	cmd := &cobra.Command{
		Use: "kubectl-flotilla",
		// kubectl runs it as `kubectl flotilla`: help and usage say so.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl flotilla"},
		Short:       "See where Flotilla runs workloads across the fleet, and why.",
		Long: `kubectl flotilla reads the Flotilla hub's objects (Clusters, bindings, Works,
the scheduler's recorded decision) on the host cluster and shows them as
tables or JSON:

  kubectl flotilla clusters               # health, taints, fleet guard, heartbeat, remedies
  kubectl flotilla where nginx            # where the template nginx runs, evictions, history, why
  kubectl flotilla explain nginx          # why each cluster was (not) chosen
  kubectl flotilla rollout status nginx   # a staged rollout: phase, group, each cluster's verdict
                                          # (rollout approve / resume annotate the template)

Install: put bin/kubectl-flotilla in PATH (make build; export PATH=$PWD/bin:$PATH).`,
		SilenceUsage:  true,
		SilenceErrors: false,
		Version:       version.String(),
		Args:          cobra.NoArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	pf := cmd.PersistentFlags()
	o.Kube.AddFlags(pf, "the hub's host cluster")
	pf.StringVarP(&o.Namespace, "namespace", "n", "", "Namespace of the template; empty means the context's namespace (as kubectl).")
	pf.StringVar(&o.HubNamespace, "hub-namespace", o.HubNamespace, "The hub's namespace (its --leader-elect-resource-namespace), where it publishes the fleet guard's verdict.")
	pf.StringVarP(&o.Output, "output", "o", "", "Output format: one of (wide, json, yaml); empty means a table.")
	cmd.AddCommand(newClustersCommand(o), newWhereCommand(o), newExplainCommand(o), newRolloutCommand(o))
	return cmd
}

func (o *Options) validateOutput(wide bool) error {
	switch o.Output {
	case "", "json", "yaml":
		return nil
	case "wide":
		if wide {
			return nil
		}
	}
	allowed := "json, yaml"
	if wide {
		allowed = "wide, json, yaml"
	}
	return fmt.Errorf("unknown output format %q: one of %s", o.Output, allowed)
}

// printStructured prints v as JSON or YAML when -o asks for it and reports
// whether it did.
func (o *Options) printStructured(v any) (bool, error) {
	switch o.Output {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return true, err
		}
		_, err = fmt.Fprintln(o.Out, string(b))
		return true, err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return true, err
		}
		_, err = o.Out.Write(b)
		return true, err
	}
	return false, nil
}
