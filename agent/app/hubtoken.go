package app

import (
	"context"
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
	"github.com/flotilla-io/flotilla/pkg/agent/hubconn"
	"github.com/flotilla-io/flotilla/pkg/agent/hubtoken"
	"github.com/flotilla-io/flotilla/pkg/cmdutil"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

// newHubTokenRenewer makes hubCfg take its bearer token from a renewer
// (nil when the hub credential is not a renewable token). It must run
// before any hub client is made from hubCfg.
func newHubTokenRenewer(ctx context.Context, opts *Options, hubCfg *rest.Config, member kubernetes.Interface) (*hubtoken.Renewer, error) {
	var store hubtoken.Store
	switch {
	case opts.HubTokenFile != "":
		store = &hubtoken.FileStore{Path: opts.HubTokenFile}
	case opts.HubTokenSecret != "":
		store = &hubtoken.SecretStore{Client: member, Namespace: opts.LeaderElection.ResourceNamespace, Name: opts.HubTokenSecret}
	}
	return hubtoken.New(ctx, hubCfg, hubtoken.Options{
		Cluster: opts.ClusterName, RenewFraction: opts.HubTokenRenewFraction, Lifetime: opts.HubTokenExpiration, Store: store,
		Reload: func() (string, error) { return hubKubeconfigToken(opts.HubKubeconfig, opts.HubContext) },
	})
}

// hubKubeconfigToken reads the bearer token the hub kubeconfig holds now:
// inline, or in the token file it names (client-go's precedence: the file).
// A kubeconfig mounted from a Secret changes in place when the Secret does.
func hubKubeconfigToken(path, context string) (string, error) {
	cfg, err := cmdutil.LoadKubeconfigFile(path, context)
	if err != nil {
		return "", err
	}
	if cfg.BearerTokenFile != "" {
		data, err := os.ReadFile(cfg.BearerTokenFile)
		return string(data), err
	}
	return cfg.BearerToken, nil
}

// startHubTokenRenewer runs the renewer in every agent process, leader or
// not (a standby must hold a valid token when it takes over), and returns a
// function that stops it and waits.
func startHubTokenRenewer(ctx context.Context, renewer *hubtoken.Renewer, hubKube kubernetes.Interface, hubFlotilla flotillaclient.Interface, m *agentmetrics.Metrics) func() {
	if renewer == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		recorder, stopEvents := hubconn.NewEventRecorder(hubKube, "flotilla-agent")
		defer stopEvents()
		renewer.Run(ctx, hubKube, hubFlotilla, recorder, m)
	}()
	return func() { cancel(); <-done }
}
