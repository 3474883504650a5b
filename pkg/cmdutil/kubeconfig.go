package cmdutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/homedir"

	"github.com/flotilla-io/flotilla/pkg/version"
)

// KubeconfigFlags are kubectl's --kubeconfig and --context. Configuration
// is found the way kubectl finds it: --kubeconfig, else the files in
// KUBECONFIG (merged, the first to set a value wins), else ~/.kube/config;
// --context picks a context (default: the current one); with no file at
// all, the in-cluster service account.
type KubeconfigFlags struct {
	Kubeconfig string
	Context    string
}

// AddFlags registers --kubeconfig and --context; what names the cluster
// they are for (e.g. "the member cluster") goes into the help text.
func (k *KubeconfigFlags) AddFlags(fs *pflag.FlagSet, what string) {
	AddKubeconfigFlags(fs, &k.Kubeconfig, &k.Context, what)
}

// AddKubeconfigFlags registers --kubeconfig and --context bound to the
// given strings, for option structs that keep them as plain fields.
func AddKubeconfigFlags(fs *pflag.FlagSet, kubeconfig, context *string, what string) {
	fs.StringVar(kubeconfig, "kubeconfig", *kubeconfig,
		"Path to the kubeconfig of "+what+"; empty means KUBECONFIG, then ~/.kube/config, then the in-cluster service account (as kubectl).")
	fs.StringVar(context, "context", *context, "The kubeconfig context to use for "+what+"; empty means the current context.")
}

// Load returns the client configuration the flags name, without rate
// limits or user agent (RestConfig adds them).
func (k KubeconfigFlags) Load() (*rest.Config, error) {
	rules := defaultLoadingRules()
	rules.ExplicitPath = k.Kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: k.Context})
	where := kubeconfigSources(rules)
	if k.Context != "" {
		// client-go's own message ("context was not found for specified
		// context") names neither the files it read nor what they hold.
		if raw, err := cc.RawConfig(); err == nil {
			if _, ok := raw.Contexts[k.Context]; !ok {
				return nil, fmt.Errorf("context %q not found in %s; it has %s", k.Context, where, contextNames(raw.Contexts))
			}
		}
	}
	cfg, err := cc.ClientConfig()
	switch {
	case err == nil:
		return cfg, nil
	case clientcmd.IsEmptyConfig(err):
		return nil, fmt.Errorf("no kubeconfig found (%s) and not running in a cluster: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config", where)
	default:
		return nil, fmt.Errorf("loading %s: %w", where, err)
	}
}

// defaultLoadingRules are client-go's default rules (KUBECONFIG, else
// ~/.kube/config), with the home directory read now rather than when
// client-go was initialised (so HOME set by a test or wrapper counts), and
// without the 2015 migration of ~/.kube/.kubeconfig, which would write into
// the user's home directory.
func defaultLoadingRules() *clientcmd.ClientConfigLoadingRules {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		rules.Precedence = []string{filepath.Join(homedir.HomeDir(), clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)}
	}
	rules.MigrationRules = nil
	return rules
}

// RestConfig loads the configuration and sets rate limits and a user agent
// that names the component.
func (k KubeconfigFlags) RestConfig(qps float32, burst int, component string) (*rest.Config, error) {
	cfg, err := k.Load()
	if err != nil {
		return nil, err
	}
	return withClientSettings(cfg, qps, burst, component), nil
}

// LoadKubeconfigFile loads exactly the kubeconfig at path, with context
// (empty: its current context). Unlike KubeconfigFlags it never falls
// back to KUBECONFIG, ~/.kube/config or the in-cluster service account:
// it is for an identity that must be given explicitly (the agent's on the
// hub), where a fallback would silently talk to the wrong cluster as the
// wrong user.
func LoadKubeconfigFile(path, context string) (*rest.Config, error) {
	if path == "" {
		return nil, errors.New("no kubeconfig path given")
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	raw, err := rules.Load() // also resolves paths relative to the file
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
	}
	if context != "" {
		if _, ok := raw.Contexts[context]; !ok {
			return nil, fmt.Errorf("context %q not found in kubeconfig %s; it has %s", context, path, contextNames(raw.Contexts))
		}
	}
	// A direct (not deferred) client config: no in-cluster fallback.
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, context, &clientcmd.ConfigOverrides{}, rules).ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, fmt.Errorf("kubeconfig %s names no cluster", path)
		}
		return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// KubeconfigFileRestConfig is LoadKubeconfigFile with RestConfig's rate
// limits and user agent.
func KubeconfigFileRestConfig(path, context string, qps float32, burst int, component string) (*rest.Config, error) {
	cfg, err := LoadKubeconfigFile(path, context)
	if err != nil {
		return nil, err
	}
	return withClientSettings(cfg, qps, burst, component), nil
}

func withClientSettings(cfg *rest.Config, qps float32, burst int, component string) *rest.Config {
	cfg.QPS = qps
	cfg.Burst = burst
	cfg.UserAgent = "flotilla-" + component + "/" + version.Version
	return cfg
}

// kubeconfigSources says where rules look, for error messages: the
// explicit file, or the KUBECONFIG files, or ~/.kube/config.
func kubeconfigSources(rules *clientcmd.ClientConfigLoadingRules) string {
	if rules.ExplicitPath != "" {
		return "kubeconfig " + rules.ExplicitPath
	}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		return "KUBECONFIG=" + env
	}
	return "kubeconfig " + strings.Join(rules.Precedence, ", ") + " (KUBECONFIG unset)"
}

func contextNames[V any](m map[string]V) string {
	if len(m) == 0 {
		return "no contexts"
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return "contexts " + strings.Join(names, ", ")
}
