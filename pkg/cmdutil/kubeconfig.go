package cmdutil

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/pkg/version"
)

// KubeconfigFlags are kubectl's --kubeconfig and --context. Configuration
// is found the way kubectl finds it: --kubeconfig, else the files in
// KUBECONFIG, else ~/.kube/config; --context picks a context (default:
// the current one); with no file at all, the in-cluster service account.
type KubeconfigFlags struct {
	Kubeconfig string
	Context    string
}

// AddFlags registers --kubeconfig and --context; what names the cluster
// they are for (e.g. "the member cluster") goes into the help text.
func (k *KubeconfigFlags) AddFlags(fs *pflag.FlagSet, what string) {
	fs.StringVar(&k.Kubeconfig, "kubeconfig", k.Kubeconfig,
		"Path to the kubeconfig of "+what+"; empty means KUBECONFIG, then ~/.kube/config, then the in-cluster service account (as kubectl).")
	fs.StringVar(&k.Context, "context", k.Context, "The kubeconfig context to use for "+what+"; empty means the current context.")
}

// Load returns the client configuration the flags name, without rate
// limits or user agent (RestConfig adds them).
func (k KubeconfigFlags) Load() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: k.Context}).ClientConfig()
	switch {
	case err == nil:
		return cfg, nil
	case clientcmd.IsEmptyConfig(err) || errors.Is(err, clientcmd.ErrEmptyConfig):
		return nil, errors.New("no kubeconfig found: pass --kubeconfig, set KUBECONFIG, create ~/.kube/config, or run in a cluster")
	case k.Kubeconfig != "":
		return nil, fmt.Errorf("loading kubeconfig %s: %w", k.Kubeconfig, err)
	default:
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
}

// RestConfig loads the configuration and sets rate limits and a user agent
// that names the component.
func (k KubeconfigFlags) RestConfig(qps float32, burst int, component string) (*rest.Config, error) {
	cfg, err := k.Load()
	if err != nil {
		return nil, err
	}
	cfg.QPS = qps
	cfg.Burst = burst
	cfg.UserAgent = "flotilla-" + component + "/" + version.Version
	return cfg, nil
}
