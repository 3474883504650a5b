// Command external-dns is ExternalDNS (sigs.k8s.io/external-dns, pinned in
// go.mod) with only its DNSEndpoint (crd) source and its CoreDNS provider:
// what test/externaldns runs to publish the hub's DNSEndpoints into etcd,
// which the project's CoreDNS serves.
//
// It is not the upstream main: that one links every source and provider,
// and two of their dependencies (github.com/openshift/api, which the source
// package imports, and github.com/exoscale/egoscale) are not served by the
// module proxy this project builds from. So this main parses the upstream
// flags (externaldns.Config) and drives the upstream planner (plan), TXT
// registry (registry/txt) and CoreDNS provider (provider/coredns) with the
// upstream DNSEndpoint types (apis/v1alpha1); only the loop and the listing
// of DNSEndpoints (as upstream's source/crd.go does: namespace and label
// filter, targets checked, observedGeneration written) are this file's.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	log "github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1alpha1 "sigs.k8s.io/external-dns/apis/v1alpha1"
	"sigs.k8s.io/external-dns/endpoint"
	"sigs.k8s.io/external-dns/pkg/apis/externaldns"
	"sigs.k8s.io/external-dns/plan"
	"sigs.k8s.io/external-dns/provider"
	"sigs.k8s.io/external-dns/provider/coredns"
	"sigs.k8s.io/external-dns/registry"
	"sigs.k8s.io/external-dns/registry/noop"
	"sigs.k8s.io/external-dns/registry/txt"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	cfg := externaldns.NewConfig()
	if err := cfg.ParseFlags(os.Args[1:]); err != nil {
		return fmt.Errorf("flag parsing error: %w", err)
	}
	if !slices.Equal(cfg.Sources, []string{"crd"}) || cfg.Provider != "coredns" {
		return fmt.Errorf("this build has only --source=crd and --provider=coredns (got sources %v, provider %q)", cfg.Sources, cfg.Provider)
	}
	level, err := log.ParseLevel(cfg.LogLevel)
	if err != nil {
		return err
	}
	log.SetLevel(level)

	restConfig, err := clientcmd.BuildConfigFromFlags(cfg.APIServerURL, cfg.KubeConfig)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := apiv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	// As upstream's crd source: list options are encoded for this group.
	metav1.AddToGroupVersion(scheme, apiv1alpha1.GroupVersion)
	kube, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	selector, err := labels.Parse(cfg.LabelFilter)
	if err != nil {
		return fmt.Errorf("--label-filter: %w", err)
	}
	src := &crdSource{client: kube, namespace: cfg.Namespace, selector: selector}

	domainFilter := endpoint.NewDomainFilterWithOptions(
		endpoint.WithDomainFilter(cfg.DomainFilter),
		endpoint.WithDomainExclude(cfg.DomainExclude),
		endpoint.WithRegexDomainFilter(cfg.RegexDomainFilter),
		endpoint.WithRegexDomainExclude(cfg.RegexDomainExclude),
	)
	p, err := coredns.New(ctx, cfg, domainFilter)
	if err != nil {
		return err
	}
	var reg registry.Registry
	switch cfg.Registry {
	case "txt":
		reg, err = txt.New(cfg, p)
	case "noop":
		reg, err = noop.New(cfg, p)
	default:
		err = fmt.Errorf("this build has only --registry=txt and --registry=noop (got %q)", cfg.Registry)
	}
	if err != nil {
		return err
	}
	policy, ok := plan.Policies[cfg.Policy]
	if !ok {
		return fmt.Errorf("unknown policy: %s", cfg.Policy)
	}
	log.Infof("external-dns (crd source, coredns provider): interval %s, namespace %q, label filter %q, owner %q",
		cfg.Interval, cfg.Namespace, cfg.LabelFilter, cfg.TXTOwnerID)
	for {
		if err := runOnce(ctx, cfg, src, reg, policy, domainFilter); err != nil {
			if cfg.Once {
				return err
			}
			log.Errorf("Failed to do run once: %v", err)
		}
		if cfg.Once {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(cfg.Interval):
		}
	}
}

// runOnce is upstream's Controller.RunOnce: the registry's records, the
// source's endpoints, a plan between them, its changes applied.
func runOnce(ctx context.Context, cfg *externaldns.Config, src *crdSource, reg registry.Registry, policy plan.Policy, filter *endpoint.DomainFilter) error {
	current, err := reg.Records(ctx)
	if err != nil {
		return fmt.Errorf("registry records: %w", err)
	}
	ctx = context.WithValue(ctx, provider.RecordsContextKey, current)
	desired, err := src.Endpoints(ctx)
	if err != nil {
		return fmt.Errorf("source endpoints: %w", err)
	}
	desired, err = reg.AdjustEndpoints(desired)
	if err != nil {
		return fmt.Errorf("adjusting endpoints: %w", err)
	}
	p := (&plan.Plan{
		Policies:       []plan.Policy{policy},
		Current:        current,
		Desired:        desired,
		DomainFilter:   endpoint.MatchAllDomainFilters{filter, reg.GetDomainFilter()},
		ManagedRecords: cfg.ManagedDNSRecordTypes,
		ExcludeRecords: cfg.ExcludeDNSRecordTypes,
		OwnerID:        reg.OwnerID(),
		OldOwnerID:     cfg.TXTOwnerOld,
	}).Calculate()
	if !p.Changes.HasChanges() {
		log.Debug("All records are already up to date")
		return nil
	}
	log.Infof("Applying changes: create %d, update %d, delete %d",
		len(p.Changes.Create), len(p.Changes.UpdateNew), len(p.Changes.Delete))
	return reg.ApplyChanges(ctx, p.Changes)
}

// crdSource lists DNSEndpoints as upstream's source/crd.go does.
type crdSource struct {
	client    client.Client
	namespace string
	selector  labels.Selector
}

func (cs *crdSource) Endpoints(ctx context.Context) ([]*endpoint.Endpoint, error) {
	list := &apiv1alpha1.DNSEndpointList{}
	opts := []client.ListOption{client.InNamespace(cs.namespace)}
	if !cs.selector.Empty() {
		opts = append(opts, client.MatchingLabelsSelector{Selector: cs.selector})
	}
	if err := cs.client.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	var out []*endpoint.Endpoint
	for i := range list.Items {
		de := &list.Items[i]
		for _, ep := range de.Spec.Endpoints {
			if ep == nil || illegalTargets(ep) {
				continue
			}
			ep.WithLabel(endpoint.ResourceLabelKey, fmt.Sprintf("crd/%s/%s", de.Namespace, de.Name))
			out = append(out, ep)
		}
		if de.Status.ObservedGeneration != de.Generation {
			de.Status.ObservedGeneration = de.Generation
			if err := cs.client.Status().Update(ctx, de); err != nil {
				log.Warnf("Could not update observedGeneration of DNSEndpoint %s/%s: %v", de.Namespace, de.Name, err)
			}
		}
	}
	return endpoint.MergeEndpoints(out), nil
}

// illegalTargets: address targets must not end with a dot (upstream skips
// such an endpoint with a warning).
func illegalTargets(ep *endpoint.Endpoint) bool {
	if ep.RecordType != endpoint.RecordTypeA && ep.RecordType != endpoint.RecordTypeAAAA {
		return false
	}
	for _, t := range ep.Targets {
		if strings.HasSuffix(t, ".") {
			log.Warnf("Endpoint %s has an illegal target %q for %s record", ep.DNSName, t, ep.RecordType)
			return true
		}
	}
	return false
}
