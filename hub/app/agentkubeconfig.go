package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/pkg/cmdutil"
	"github.com/flotilla-io/flotilla/pkg/hub/clusterlifecycle"
)

// newAgentKubeconfigCommand is `hub agent-kubeconfig`: a kubeconfig for a
// cluster's agent identity, with a token from the TokenRequest API.
func newAgentKubeconfigCommand() *cobra.Command {
	var (
		kube                       cmdutil.KubeconfigFlags
		cluster, server, tokenFile string
		duration, wait_            time.Duration
	)
	cmd := &cobra.Command{
		Use:   "agent-kubeconfig --cluster NAME",
		Short: "Print a kubeconfig for a member's agent identity on the hub.",
		Long: `Prints a kubeconfig that authenticates as the agent identity the hub made for
a Cluster (ServiceAccount flotilla-agent in flotilla-es-<cluster>), with a
token from the TokenRequest API valid for --duration. The hub is reached the
way kubectl reaches a cluster (--kubeconfig, KUBECONFIG, ~/.kube/config,
--context, then in-cluster), as a user allowed to create serviceaccounts/token
in flotilla-es-<cluster>.

Rotation: run it again before the token expires and replace the agent's
kubeconfig Secret. With --token-file the kubeconfig refers to that file
instead of embedding the token; client-go rereads it, so rotating is just
rewriting the file (e.g. from a CronJob), without restarting the agent.`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cluster == "" {
				return fmt.Errorf("--cluster is required")
			}
			cfg, err := kube.RestConfig(20, 40, "hub")
			if err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			token, err := requestToken(ctx, client, cluster, duration, wait_)
			if err != nil {
				return err
			}
			if server == "" {
				server = cfg.Host
			}
			user := &clientcmdapi.AuthInfo{Token: token}
			if tokenFile != "" {
				if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
					return err
				}
				user = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
			}
			name := "flotilla-agent-" + cluster
			out := clientcmdapi.NewConfig()
			out.Clusters["hub"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cfg.CAData, InsecureSkipTLSVerify: cfg.Insecure}
			if len(cfg.CAData) == 0 && cfg.CAFile != "" {
				data, err := os.ReadFile(cfg.CAFile)
				if err != nil {
					return err
				}
				out.Clusters["hub"].CertificateAuthorityData = data
			}
			out.AuthInfos[name] = user
			out.Contexts[name] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: name, Namespace: clusterlifecycle.Namespace(cluster)}
			out.CurrentContext = name
			data, err := clientcmd.Write(*out)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
	fs := cmd.Flags()
	kube.AddFlags(fs, "the hub (host cluster)")
	fs.StringVar(&cluster, "cluster", "", "Name of the Cluster whose agent identity to use (required).")
	fs.StringVar(&server, "server", "", "Hub apiserver URL as the member reaches it (default: the server of the kubeconfig context used).")
	fs.StringVar(&tokenFile, "token-file", "", "Write the token to this file and refer to it from the kubeconfig (for rotation without restarts).")
	fs.DurationVar(&duration, "duration", 24*time.Hour, "Requested token lifetime (the apiserver may cap it).")
	fs.DurationVar(&wait_, "wait", 30*time.Second, "How long to wait for the hub to create the identity of a new Cluster.")
	return cmd
}

func requestToken(ctx context.Context, kube kubernetes.Interface, cluster string, duration, timeout time.Duration) (string, error) {
	ns := clusterlifecycle.Namespace(cluster)
	var token string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, clusterlifecycle.AgentServiceAccount,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(duration / time.Second))}},
			metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil // the hub has not made the identity yet
		}
		if err != nil {
			return false, err
		}
		token = tr.Status.Token
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("no agent identity for cluster %q (ServiceAccount %s/%s): is the Cluster registered and the hub running? %w",
			cluster, ns, clusterlifecycle.AgentServiceAccount, err)
	}
	return token, nil
}
