// Package cmdutil holds what the hub and agent commands share: signal
// handling, client configuration and an apiserver readiness check.
package cmdutil

import (
	"context"
	"flag"
	"fmt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/flotilla-io/flotilla/pkg/health"
	"github.com/flotilla-io/flotilla/pkg/healthserver"
)

// SignalContext is cancelled on the first SIGTERM or SIGINT, so the binary
// can stop its controllers and servers cleanly; a second signal exits at once.
func SignalContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-ch
		cancel()
		<-ch
		os.Exit(1)
	}()
	return ctx
}

// APIServerReady returns a readiness check that passes while the apiserver
// behind client answers 200 to /readyz (or /healthz on servers without it).
func APIServerReady(client rest.Interface) healthserver.Check {
	return func(ctx context.Context) error {
		code, body, err := health.GetAPIServerHealth(ctx, client)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("apiserver answered %d: %s", code, strings.TrimSpace(body))
		}
		return nil
	}
}

// FlotillaGroupVersions are the API groups whose CRDs the hub needs.
var FlotillaGroupVersions = []string{
	"cluster.flotilla.io/v1alpha1",
	"policy.flotilla.io/v1alpha1",
	"work.flotilla.io/v1alpha1",
	"remedy.flotilla.io/v1alpha1",
	"networking.flotilla.io/v1alpha1",
}

// APIGroupsServed returns a readiness check that passes once the apiserver
// serves every given group/version (the CRDs are installed and established).
func APIGroupsServed(client discovery.DiscoveryInterface, groupVersions ...string) healthserver.Check {
	return func(ctx context.Context) error {
		var missing []string
		for _, gv := range groupVersions {
			// The REST client, not ServerResourcesForGroupVersion: a probe
			// must end with its context, and discovery's takes none (an
			// unreachable apiserver held it ~55 s, past any probe timeout).
			path := "/apis/" + gv
			if !strings.Contains(gv, "/") {
				path = "/api/" + gv
			}
			err := client.RESTClient().Get().AbsPath(path).Do(ctx).Error()
			if ctx.Err() != nil {
				return fmt.Errorf("API discovery of %s: %w", gv, ctx.Err())
			}
			if apierrors.IsNotFound(err) {
				missing = append(missing, gv)
			} else if err != nil {
				return fmt.Errorf("API discovery of %s: %w", gv, err)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("API not served (CRDs not installed?): %s", strings.Join(missing, ", "))
		}
		return nil
	}
}

// AddKlogFlags registers klog's flags (-v, --vmodule, ...) on fs.
func AddKlogFlags(fs *pflag.FlagSet) {
	local := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(local)
	fs.AddGoFlagSet(local)
}
