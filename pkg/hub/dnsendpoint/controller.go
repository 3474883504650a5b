/*
Copyright The Flotilla Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package dnsendpoint publishes the hub's traffic decisions as ExternalDNS
// DNSEndpoint objects (externaldns.k8s.io/v1alpha1), so any DNS provider
// ExternalDNS supports serves them. One DNSEndpoint per MultiClusterIngress,
// of the same name and namespace, owned by it (ownerReference) and labelled
// as the hub's; its endpoints are the A, AAAA and CNAME sets of the hosts
// the ingress owns (a TXT for a host without addresses, so its name exists), built from dnstraffic.HostAnswers like the embedded
// DNS server's answers (the same one-owner-per-host rule, serving
// clusters, hostnames and TTL; weights where the provider has them).
//
// It fails static: DNSEndpoints carry no finalizer and nothing removes them
// when the hub stops, and while the hub cannot see the fleet (no cluster
// has reported, or none is Ready: the fleet guard's FullDisruption) or
// cannot see an ingress's addresses, or reads a fail-open decision made
// before a cluster came back (StaleFailOpen), the published records are
// kept, not blanked or replaced by a fail-open guess.
package dnsendpoint

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	clusterlisters "github.com/flotilla-io/flotilla/pkg/generated/listers/cluster/v1alpha1"
	networkinglisters "github.com/flotilla-io/flotilla/pkg/generated/listers/networking/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
	"github.com/flotilla-io/flotilla/pkg/hub/dnstraffic"
	"github.com/flotilla-io/flotilla/pkg/metrics"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
)

// GVR and kind of ExternalDNS's DNSEndpoint.
var (
	GVR = schema.GroupVersionResource{Group: "externaldns.k8s.io", Version: "v1alpha1", Resource: "dnsendpoints"}
	GVK = GVR.GroupVersion().WithKind("DNSEndpoint")
)

// Labels on every DNSEndpoint the hub writes. ExternalDNS can be told to
// publish only these (--label-filter=app.kubernetes.io/managed-by=flotilla-hub).
const (
	LabelManagedBy    = "app.kubernetes.io/managed-by"
	ManagedByHub      = "flotilla-hub"
	LabelIngress      = "networking.flotilla.io/multicluster-ingress"
	managedBySelector = LabelManagedBy + "=" + ManagedByHub
)

// Event reasons on a MultiClusterIngress.
const (
	EventPublished = "DNSEndpointPublished"
	// EventHeld (Warning): the hub keeps the last published records.
	EventHeld = "DNSEndpointHeld"
	// EventConflict (Warning): a DNSEndpoint of the ingress's name exists
	// and is not the hub's; the hub leaves it alone.
	EventConflict = "DNSEndpointConflict"
)

// Metrics of the publisher.
type Metrics struct {
	// HeldIngresses is the number of ingresses whose last published
	// records are kept because the hub cannot see enough to replace them.
	HeldIngresses prometheus.Gauge
	// Writes counts DNSEndpoint writes by operation (create, update, delete).
	Writes *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		HeldIngresses: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: "dns_endpoint", Name: "held_ingresses",
			Help: "MultiClusterIngresses whose last published DNSEndpoint records are kept because the hub cannot see the fleet or their addresses."}),
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "dns_endpoint", Name: "writes_total",
			Help: "DNSEndpoint writes by operation (create, update, delete)."}, []string{"operation"}),
	}
	reg.MustRegister(m.HeldIngresses, m.Writes)
	return m
}

// Options tune the controller.
type Options struct {
	// TTL of the published records whose ingress sets none
	// (spec.strategy.dnsTtlSeconds).
	TTL time.Duration
	// WeightProperty is the provider-specific property carrying a record
	// set's weight (aws/weight); "" publishes no weights (Records).
	WeightProperty string
	// DecisionSettle bounds how long a decision that looks stale
	// (StaleFailOpen) is held; 0 means 10 s. The ingress controller decides
	// again within milliseconds of a cluster change, so one still looking
	// stale after this is a real fail-open (workloads Unhealthy on the
	// Ready clusters), published as the embedded DNS answers it.
	DecisionSettle time.Duration
	// HostNamespaces say which namespaces may claim which domains
	// (--ingress-host-namespaces), as for the embedded DNS server.
	HostNamespaces dnstraffic.DomainRules
	Recorder       record.EventRecorder
	Metrics        *Metrics
}

// Controller keeps one DNSEndpoint per MultiClusterIngress.
type Controller struct {
	opts      Options
	client    dynamic.Interface
	ingresses networkinglisters.MultiClusterIngressLister
	byHost    cache.Indexer
	clusters  clusterlisters.ClusterLister
	endpoints cache.GenericLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	dynStart  func(<-chan struct{})
	dynStop   func()

	mu    sync.Mutex
	held  map[string]string    // ingress key -> hold reason
	stale map[string]time.Time // ingress key -> since when its decision looks stale
}

// NewController wires the controller to factory's MultiClusterIngress and
// Cluster informers and an informer of its own over the hub's DNSEndpoints.
// Sharing the factory with the ingress controller matters: a status it
// wrote from a view of the clusters is judged here against the same cache,
// never an older one.
func NewController(client dynamic.Interface, factory flotillainformers.SharedInformerFactory, opts Options) *Controller {
	ingresses := factory.Networking().V1alpha1().MultiClusterIngresses()
	clusters := factory.Cluster().V1alpha1().Clusters()
	utilruntime.Must(dnstraffic.AddHostIndex(ingresses.Informer()))
	dynFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = managedBySelector })
	endpoints := dynFactory.ForResource(GVR)
	c := &Controller{opts: opts, client: client,
		ingresses: ingresses.Lister(), byHost: ingresses.Informer().GetIndexer(), clusters: clusters.Lister(), endpoints: endpoints.Lister(),
		synced:   []cache.InformerSynced{ingresses.Informer().HasSynced, clusters.Informer().HasSynced, endpoints.Informer().HasSynced},
		dynStart: dynFactory.Start, dynStop: dynFactory.Shutdown, held: map[string]string{}, stale: map[string]time.Time{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "dns-endpoint"}),
	}
	_, _ = ingresses.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueue(obj); c.enqueueClaimants(obj) },
		UpdateFunc: func(o, n any) {
			c.enqueue(n)
			if dnstraffic.HostsChanged(o, n) {
				c.enqueueClaimants(o)
				c.enqueueClaimants(n)
			}
		},
		DeleteFunc: func(obj any) { c.enqueue(obj); c.enqueueClaimants(obj) },
	})
	// Whether the hub sees the fleet changes with the clusters' Ready.
	_, _ = clusters.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.enqueueAll() },
		UpdateFunc: func(o, n any) {
			oc, ok1 := o.(*clusterv1alpha1.Cluster)
			nc, ok2 := n.(*clusterv1alpha1.Cluster)
			if !ok1 || !ok2 || readyStatus(oc) != readyStatus(nc) {
				c.enqueueAll()
			}
		},
		DeleteFunc: func(any) { c.enqueueAll() },
	})
	// A DNSEndpoint changed or deleted by hand is put back.
	_, _ = endpoints.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue, UpdateFunc: func(_, n any) { c.enqueue(n) }, DeleteFunc: c.enqueue,
	})
	return c
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

func (c *Controller) enqueueClaimants(obj any) {
	for _, other := range dnstraffic.SharingHosts(c.byHost, obj) {
		c.enqueue(other)
	}
}

func (c *Controller) enqueueAll() {
	list, _ := c.ingresses.List(labels.Everything())
	for _, mci := range list {
		c.enqueue(mci)
	}
}

func readyStatus(c *clusterv1alpha1.Cluster) metav1.ConditionStatus {
	if cond := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady); cond != nil {
		return cond.Status
	}
	return ""
}

// fleetSeen judges the clusters as the fleet guard does
// (clustertaint.Judge): false when no cluster has reported, or none is
// Ready (FullDisruption, where the guard assumes the hub is the one cut
// off). It reads the cache, not the guard's periodic verdict, so it is
// never older than the view the traffic decision was made from.
func (c *Controller) fleetSeen() (bool, error) {
	clusters, err := c.clusters.List(labels.Everything())
	if err != nil {
		return false, err
	}
	s := clustertaint.Judge(clusters, 1)
	return s.Total > 0 && s.Mode != clustertaint.GuardFullDisruption, nil
}

// blind is why the hub cannot trust mci's recorded decision now ("" when
// it can): it sees no cluster Ready (HoldFleetUnseen), or the decision
// failed open before a cluster came back and has not been made again
// (HoldDecisionStale, for at most Options.DecisionSettle; the key is
// requeued).
func (c *Controller) blind(key string, mci *networkingv1alpha1.MultiClusterIngress) (string, error) {
	seen, err := c.fleetSeen()
	if err != nil {
		return "", err
	}
	if !seen {
		c.staleSince(key, false)
		return HoldFleetUnseen, nil
	}
	if !StaleFailOpen(&mci.Status, c.ready) {
		c.staleSince(key, false)
		return "", nil
	}
	settle := c.opts.DecisionSettle
	if settle <= 0 {
		settle = 10 * time.Second
	}
	if wait := settle - time.Since(c.staleSince(key, true)); wait > 0 {
		c.queue.AddAfter(key, wait)
		return HoldDecisionStale, nil
	}
	return "", nil
}

// ready says whether the cluster cache shows cluster Ready.
func (c *Controller) ready(cluster string) bool {
	cl, err := c.clusters.Get(cluster)
	return err == nil && readyStatus(cl) == metav1.ConditionTrue
}

// staleSince records whether key's decision looks stale and returns since
// when it has (zero when it does not).
func (c *Controller) staleSince(key string, stale bool) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !stale {
		delete(c.stale, key)
		return time.Time{}
	}
	since, ok := c.stale[key]
	if !ok {
		since = time.Now()
		c.stale[key] = since
	}
	return since
}

// Run works until ctx is done. The MultiClusterIngress informer is started
// by its factory; the DNSEndpoint informer here.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	c.dynStart(ctx.Done())
	defer c.dynStop()
	if !cache.WaitForNamedCacheSync("dns-endpoint", ctx.Done(), c.synced...) {
		return
	}
	queueworker.Run(ctx, "dns-endpoint", c.queue, workers, c.sync)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	existing, err := c.current(key)
	if err != nil {
		return err
	}
	mci, err := c.ingresses.MultiClusterIngresses(namespace).Get(name)
	if apierrors.IsNotFound(err) || err == nil && mci.DeletionTimestamp != nil {
		c.setHeld(key, "")
		c.staleSince(key, false)
		return c.deleteOrphan(ctx, existing)
	}
	if err != nil {
		return err
	}
	claimants, err := c.claimants(mci)
	if err != nil {
		return err
	}
	published, err := endpointsOf(existing)
	if err != nil {
		// Not what the hub writes (edited by hand): replace it.
		klog.FromContext(ctx).Info("DNSEndpoint spec unreadable, rewriting it", "dnsEndpoint", key, "err", err)
		published = nil
	}
	blind, err := c.blind(key, mci)
	if err != nil {
		return err
	}
	want, hold := Publish(blind, published, TrafficOf(mci, claimants, c.opts.HostNamespaces), Records{TTL: int64(c.opts.TTL / time.Second), WeightProperty: c.opts.WeightProperty})
	c.report(mci, key, hold)
	if existing == nil && len(want) == 0 {
		return nil // nothing to publish, nothing published
	}
	desired, err := c.object(mci, want)
	if err != nil {
		return err
	}
	api := c.client.Resource(GVR).Namespace(namespace)
	if existing == nil {
		if _, err := api.Create(ctx, desired, metav1.CreateOptions{}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// Not labelled as the hub's, so not in the informer.
				c.event(mci, corev1.EventTypeWarning, EventConflict,
					"DNSEndpoint %s/%s exists and is not the hub's (no label %s): it is left alone and this ingress is not published through ExternalDNS", namespace, name, managedBySelector)
				return nil
			}
			return fmt.Errorf("creating DNSEndpoint %s: %w", key, err)
		}
		c.count("create")
		c.event(mci, corev1.EventTypeNormal, EventPublished, "DNSEndpoint %s/%s published: %s", namespace, name, describe(want))
		return nil
	}
	if equality.Semantic.DeepEqual(existing.Object["spec"], desired.Object["spec"]) &&
		equality.Semantic.DeepEqual(existing.GetLabels(), desired.GetLabels()) &&
		equality.Semantic.DeepEqual(existing.GetOwnerReferences(), desired.GetOwnerReferences()) {
		return nil
	}
	updated := existing.DeepCopy()
	updated.Object["spec"] = desired.Object["spec"]
	updated.SetLabels(desired.GetLabels())
	updated.SetOwnerReferences(desired.GetOwnerReferences())
	if _, err := api.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating DNSEndpoint %s: %w", key, err)
	}
	c.count("update")
	c.event(mci, corev1.EventTypeNormal, EventPublished, "DNSEndpoint %s/%s published: %s", namespace, name, describe(want))
	return nil
}

// current is the hub's DNSEndpoint for key from the cache (nil: none).
func (c *Controller) current(key string) (*unstructured.Unstructured, error) {
	obj, err := c.endpoints.Get(key)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("DNSEndpoint %s: unexpected %T in cache", key, obj)
	}
	return u, nil
}

// deleteOrphan deletes the hub's DNSEndpoint of an ingress that is gone
// (its ownerReference lets the garbage collector do the same). Only an
// ingress deleted by its owner takes its records away; a stopped hub or
// an unseen fleet never does.
func (c *Controller) deleteOrphan(ctx context.Context, existing *unstructured.Unstructured) error {
	if existing == nil {
		return nil
	}
	uid := existing.GetUID()
	err := c.client.Resource(GVR).Namespace(existing.GetNamespace()).Delete(ctx, existing.GetName(),
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting DNSEndpoint %s/%s of a deleted MultiClusterIngress: %w", existing.GetNamespace(), existing.GetName(), err)
	}
	if err == nil {
		c.count("delete")
	}
	return nil
}

// claimants are the ingresses sharing a host with mci, mci included.
func (c *Controller) claimants(mci *networkingv1alpha1.MultiClusterIngress) ([]*networkingv1alpha1.MultiClusterIngress, error) {
	return dnstraffic.Claimants(c.byHost, mci)
}

// object is the DNSEndpoint the hub writes for mci.
func (c *Controller) object(mci *networkingv1alpha1.MultiClusterIngress, eps []Endpoint) (*unstructured.Unstructured, error) {
	list := make([]any, 0, len(eps))
	for _, ep := range eps {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ep)
		if err != nil {
			return nil, err
		}
		list = append(list, m)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"endpoints": list}}}
	u.SetGroupVersionKind(GVK)
	u.SetNamespace(mci.Namespace)
	u.SetName(mci.Name)
	u.SetLabels(map[string]string{LabelManagedBy: ManagedByHub, LabelIngress: mci.Name})
	// No blockOwnerDeletion: it would need update on the ingress's
	// finalizers, and nothing waits for the records to go.
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: networkingv1alpha1.SchemeGroupVersion.String(),
		Kind: "MultiClusterIngress", Name: mci.Name, UID: mci.UID, Controller: ptrTo(true)}})
	return u, nil
}

func ptrTo[T any](v T) *T { return &v }

// endpointsOf reads a DNSEndpoint's spec.endpoints (nil object: none).
func endpointsOf(u *unstructured.Unstructured) ([]Endpoint, error) {
	if u == nil {
		return nil, nil
	}
	raw, _, err := unstructured.NestedSlice(u.Object, "spec", "endpoints")
	if err != nil {
		return nil, err
	}
	out := make([]Endpoint, 0, len(raw))
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.endpoints: item is %T", r)
		}
		var ep Endpoint
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ep); err != nil {
			return nil, err
		}
		out = append(out, ep)
	}
	return out, nil
}

// describe is a short account of endpoints for an event.
func describe(eps []Endpoint) string {
	if len(eps) == 0 {
		return "no records"
	}
	s := ""
	for i, ep := range eps {
		if i == 3 {
			return s + fmt.Sprintf(" and %d more", len(eps)-3)
		}
		if i > 0 {
			s += "; "
		}
		s += fmt.Sprintf("%s %s %v", ep.DNSName, ep.RecordType, ep.Targets)
		if ep.SetIdentifier != "" {
			s += fmt.Sprintf(" (set %s, %s)", ep.SetIdentifier, describeProperties(ep.ProviderSpecific))
		}
	}
	return s
}

func describeProperties(ps []ProviderSpecificProperty) string {
	parts := make([]string, 0, len(ps))
	for _, p := range ps {
		parts = append(parts, p.Name+"="+p.Value)
	}
	return strings.Join(parts, ",")
}

// report records a hold starting or ending for the ingress.
func (c *Controller) report(mci *networkingv1alpha1.MultiClusterIngress, key, hold string) {
	was := c.setHeld(key, hold)
	if was == hold {
		return
	}
	switch hold {
	case HoldFleetUnseen:
		c.event(mci, corev1.EventTypeWarning, EventHeld, "keeping the last published DNS records: the hub sees no cluster Ready (or has not judged the fleet yet) and assumes it is the one cut off")
	case HoldAddressesUnseen:
		c.event(mci, corev1.EventTypeWarning, EventHeld, "keeping the last published DNS records: the backends are placed and not blocked, but no load-balancer address is known")
	}
}

// setHeld records key's hold reason ("" for none) and returns the previous.
func (c *Controller) setHeld(key, reason string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := c.held[key]
	if reason == "" {
		delete(c.held, key)
	} else {
		c.held[key] = reason
	}
	if c.opts.Metrics != nil {
		c.opts.Metrics.HeldIngresses.Set(float64(len(c.held)))
	}
	return was
}

func (c *Controller) count(op string) {
	if c.opts.Metrics != nil {
		c.opts.Metrics.Writes.WithLabelValues(op).Inc()
	}
}

func (c *Controller) event(obj runtime.Object, eventType, reason, format string, args ...any) {
	if c.opts.Recorder != nil {
		c.opts.Recorder.Eventf(obj, eventType, reason, format, args...)
	}
}
