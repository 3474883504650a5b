package cmdutil_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/flotilla-io/flotilla/pkg/cmdutil"
)

// kcContext is one context of a test kubeconfig: its name, and the server
// of its cluster (which the tests read back to see which one was chosen).
type kcContext struct{ name, server string }

// writeTestKubeconfig writes a kubeconfig whose current context is the
// first one given; each context has a cluster and user of its own name.
func writeTestKubeconfig(t *testing.T, path string, contexts ...kcContext) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for i, c := range contexts {
		cfg.Clusters[c.name] = &clientcmdapi.Cluster{Server: c.server}
		cfg.AuthInfos[c.name] = &clientcmdapi.AuthInfo{Token: "token-" + c.name}
		cfg.Contexts[c.name] = &clientcmdapi.Context{Cluster: c.name, AuthInfo: c.name}
		if i == 0 {
			cfg.CurrentContext = c.name
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// isolateKubeconfigEnv gives the test an empty HOME, no KUBECONFIG and no
// in-cluster environment, so only what the test writes can be found.
func isolateKubeconfigEnv(t *testing.T) (home string) {
	t.Helper()
	home = t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	return home
}

func TestKubeconfigFlagsLoad(t *testing.T) {
	cases := []struct {
		name string
		// setup writes files under dir (and home) and returns the
		// KUBECONFIG value and the flags.
		setup   func(t *testing.T, dir, home string) (env string, flags cmdutil.KubeconfigFlags)
		host    string // the server expected
		wantErr []string
	}{{
		name: "--kubeconfig wins over KUBECONFIG",
		setup: func(t *testing.T, dir, home string) (string, cmdutil.KubeconfigFlags) {
			explicit := writeTestKubeconfig(t, filepath.Join(dir, "explicit"), kcContext{"a", "https://explicit:6443"})
			env := writeTestKubeconfig(t, filepath.Join(dir, "env"), kcContext{"a", "https://env:6443"})
			writeTestKubeconfig(t, filepath.Join(home, ".kube", "config"), kcContext{"a", "https://home:6443"})
			return env, cmdutil.KubeconfigFlags{Kubeconfig: explicit}
		},
		host: "https://explicit:6443",
	}, {
		name: "KUBECONFIG wins over ~/.kube/config",
		setup: func(t *testing.T, dir, home string) (string, cmdutil.KubeconfigFlags) {
			writeTestKubeconfig(t, filepath.Join(home, ".kube", "config"), kcContext{"a", "https://home:6443"})
			return writeTestKubeconfig(t, filepath.Join(dir, "env"), kcContext{"a", "https://env:6443"}), cmdutil.KubeconfigFlags{}
		},
		host: "https://env:6443",
	}, {
		name: "KUBECONFIG with two files: merged, the first file's current context and clusters win",
		setup: func(t *testing.T, dir, home string) (string, cmdutil.KubeconfigFlags) {
			first := writeTestKubeconfig(t, filepath.Join(dir, "first"), kcContext{"one", "https://first:6443"})
			second := writeTestKubeconfig(t, filepath.Join(dir, "second"), kcContext{"two", "https://second:6443"}, kcContext{"one", "https://second-one:6443"})
			return first + string(os.PathListSeparator) + second, cmdutil.KubeconfigFlags{}
		},
		host: "https://first:6443",
	}, {
		name: "KUBECONFIG with two files: a context only the second file has",
		setup: func(t *testing.T, dir, home string) (string, cmdutil.KubeconfigFlags) {
			first := writeTestKubeconfig(t, filepath.Join(dir, "first"), kcContext{"one", "https://first:6443"})
			second := writeTestKubeconfig(t, filepath.Join(dir, "second"), kcContext{"two", "https://second:6443"})
			return first + string(os.PathListSeparator) + second, cmdutil.KubeconfigFlags{Context: "two"}
		},
		host: "https://second:6443",
	}, {
		name: "KUBECONFIG unset: ~/.kube/config",
		setup: func(t *testing.T, dir, home string) (string, cmdutil.KubeconfigFlags) {
			writeTestKubeconfig(t, filepath.Join(home, ".kube", "config"), kcContext{"a", "https://home:6443"})
			return "", cmdutil.KubeconfigFlags{}
		},
		host: "https://home:6443",
	}, {
		name: "--context picks a context that is not the current one",
		setup: func(t *testing.T, dir, home string) (string, cmdutil.KubeconfigFlags) {
			writeTestKubeconfig(t, filepath.Join(home, ".kube", "config"),
				kcContext{"current", "https://current:6443"}, kcContext{"other", "https://other:6443"})
			return "", cmdutil.KubeconfigFlags{Context: "other"}
		},
		host: "https://other:6443",
	}, {
		name: "--context with --kubeconfig",
		setup: func(t *testing.T, dir, home string) (string, cmdutil.KubeconfigFlags) {
			p := writeTestKubeconfig(t, filepath.Join(dir, "explicit"),
				kcContext{"current", "https://current:6443"}, kcContext{"other", "https://other:6443"})
			return "", cmdutil.KubeconfigFlags{Kubeconfig: p, Context: "other"}
		},
		host: "https://other:6443",
	}, {
		name: "unknown context: the error names it, the files and the contexts there are",
		setup: func(t *testing.T, dir, home string) (string, cmdutil.KubeconfigFlags) {
			p := writeTestKubeconfig(t, filepath.Join(dir, "env"), kcContext{"a", "https://a:6443"}, kcContext{"b", "https://b:6443"})
			return p, cmdutil.KubeconfigFlags{Context: "nope"}
		},
		wantErr: []string{`context "nope" not found`, "KUBECONFIG=", "contexts a, b"},
	}, {
		name: "missing --kubeconfig file is an error, not a fallback",
		setup: func(t *testing.T, dir, home string) (string, cmdutil.KubeconfigFlags) {
			writeTestKubeconfig(t, filepath.Join(home, ".kube", "config"), kcContext{"a", "https://home:6443"})
			return "", cmdutil.KubeconfigFlags{Kubeconfig: filepath.Join(dir, "absent")}
		},
		wantErr: []string{"absent", "no such file"},
	}, {
		name: "nothing at all",
		setup: func(t *testing.T, dir, home string) (string, cmdutil.KubeconfigFlags) {
			return "", cmdutil.KubeconfigFlags{}
		},
		wantErr: []string{"no kubeconfig found", filepath.Join(".kube", "config"), "not running in a cluster", "pass --kubeconfig, set KUBECONFIG"},
	}, {
		name: "KUBECONFIG naming only missing files",
		setup: func(t *testing.T, dir, home string) (string, cmdutil.KubeconfigFlags) {
			return filepath.Join(dir, "absent"), cmdutil.KubeconfigFlags{}
		},
		wantErr: []string{"no kubeconfig found", "KUBECONFIG=", "absent"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := isolateKubeconfigEnv(t)
			env, flags := tc.setup(t, t.TempDir(), home)
			t.Setenv("KUBECONFIG", env)
			cfg, err := flags.Load()
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Load() = %s, want an error", cfg.Host)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.host {
				t.Errorf("Host = %s, want %s", cfg.Host, tc.host)
			}
		})
	}
}

func TestKubeconfigFlagsRestConfig(t *testing.T) {
	home := isolateKubeconfigEnv(t)
	writeTestKubeconfig(t, filepath.Join(home, ".kube", "config"), kcContext{"a", "https://home:6443"})
	cfg, err := cmdutil.KubeconfigFlags{}.RestConfig(7, 9, "agent")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://home:6443" || cfg.QPS != 7 || cfg.Burst != 9 || !strings.HasPrefix(cfg.UserAgent, "flotilla-agent/") || cfg.BearerToken != "token-a" {
		t.Errorf("got host %s qps %v burst %d user agent %q token %q", cfg.Host, cfg.QPS, cfg.Burst, cfg.UserAgent, cfg.BearerToken)
	}
}

func TestAddKubeconfigFlags(t *testing.T) {
	var k cmdutil.KubeconfigFlags
	fs := pflagSet()
	k.AddFlags(fs, "the member cluster")
	if err := fs.Parse([]string{"--kubeconfig=/x", "--context=c"}); err != nil {
		t.Fatal(err)
	}
	if k != (cmdutil.KubeconfigFlags{Kubeconfig: "/x", Context: "c"}) {
		t.Errorf("parsed %+v", k)
	}
	if u := fs.Lookup("context").Usage; !strings.Contains(u, "the member cluster") {
		t.Errorf("--context usage %q does not name the cluster", u)
	}
}

// The agent's identity on the hub is loaded from exactly the file given:
// never KUBECONFIG or ~/.kube/config, which are the user's, not the agent's.
func TestLoadKubeconfigFile(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(t *testing.T, dir string) (path, context string)
		host    string
		wantErr []string
	}{{
		name: "current context",
		setup: func(t *testing.T, dir string) (string, string) {
			return writeTestKubeconfig(t, filepath.Join(dir, "hub"), kcContext{"hub", "https://hub:6443"}, kcContext{"other", "https://other:6443"}), ""
		},
		host: "https://hub:6443",
	}, {
		name: "context",
		setup: func(t *testing.T, dir string) (string, string) {
			return writeTestKubeconfig(t, filepath.Join(dir, "hub"), kcContext{"hub", "https://hub:6443"}, kcContext{"other", "https://other:6443"}), "other"
		},
		host: "https://other:6443",
	}, {
		name: "unknown context",
		setup: func(t *testing.T, dir string) (string, string) {
			return writeTestKubeconfig(t, filepath.Join(dir, "hub"), kcContext{"hub", "https://hub:6443"}), "nope"
		},
		wantErr: []string{`context "nope" not found in kubeconfig`, "contexts hub"},
	}, {
		name: "a context KUBECONFIG has is not looked up there",
		setup: func(t *testing.T, dir string) (string, string) {
			return writeTestKubeconfig(t, filepath.Join(dir, "hub"), kcContext{"hub", "https://hub:6443"}), "env"
		},
		wantErr: []string{`context "env" not found`},
	}, {
		name: "empty path",
		setup: func(t *testing.T, dir string) (string, string) {
			return "", ""
		},
		wantErr: []string{"no kubeconfig path given"},
	}, {
		name: "missing file",
		setup: func(t *testing.T, dir string) (string, string) {
			return filepath.Join(dir, "absent"), ""
		},
		wantErr: []string{"absent"},
	}, {
		name: "a file without clusters does not fall back",
		setup: func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "empty")
			if err := os.WriteFile(p, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			return p, ""
		},
		wantErr: []string{"names no cluster"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := isolateKubeconfigEnv(t)
			dir := t.TempDir()
			writeTestKubeconfig(t, filepath.Join(home, ".kube", "config"), kcContext{"home", "https://home:6443"})
			t.Setenv("KUBECONFIG", writeTestKubeconfig(t, filepath.Join(dir, "env"), kcContext{"env", "https://env:6443"}))
			path, context := tc.setup(t, dir)
			cfg, err := cmdutil.LoadKubeconfigFile(path, context)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("LoadKubeconfigFile() = %s, want an error", cfg.Host)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.host {
				t.Errorf("Host = %s, want %s", cfg.Host, tc.host)
			}
		})
	}
}

func pflagSet() *pflag.FlagSet { return pflag.NewFlagSet("test", pflag.ContinueOnError) }
