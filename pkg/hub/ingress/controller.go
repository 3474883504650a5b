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

// Package ingress is the MultiClusterIngress controller. For each ingress it
// records where the backend Services are placed (serviceLocations, from the
// bindings), which of those clusters a Remedy has taken out of traffic
// (trafficBlockClusters), and the load-balancer addresses of the clusters
// that get traffic (loadBalancer), which the DNS traffic manager serves.
// Its status is the single source of truth for traffic: every hub replica's
// DNS server answers from it.
package ingress

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	clusterlisters "github.com/flotilla-io/flotilla/pkg/generated/listers/cluster/v1alpha1"
	networkinglisters "github.com/flotilla-io/flotilla/pkg/generated/listers/networking/v1alpha1"
	worklisters "github.com/flotilla-io/flotilla/pkg/generated/listers/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/dnstraffic"
	"github.com/flotilla-io/flotilla/pkg/hub/hubmetrics"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// Event reasons on a MultiClusterIngress.
const (
	EventTrafficBlocked  = "TrafficBlocked"
	EventTrafficRestored = "TrafficRestored"
	EventFailOpen        = "TrafficFailOpen"
	// EventHostConflict (Warning): the ingress started losing a host to an
	// older ingress (or a different set of hosts).
	EventHostConflict = networkingv1alpha1.ReasonHostConflict
	// EventInvalidHost (Warning): a host is not a host name.
	EventInvalidHost = ReasonInvalidHost
	// EventHostNotAllowed (Warning): the ingress's namespace may not claim
	// a host it names (--ingress-host-namespaces).
	EventHostNotAllowed = networkingv1alpha1.ReasonHostNotAllowed
	// EventHostsAdmitted (Normal): every host is the ingress's again.
	EventHostsAdmitted = networkingv1alpha1.ReasonHostsAdmitted
)

// backendIndex indexes MultiClusterIngresses by "namespace/service" of each
// backend Service, so a binding or template event queues exactly the
// ingresses it concerns.
const backendIndex = "flotilla.io/multicluster-ingress-backend"

func backendIndexFunc(obj any) ([]string, error) {
	mci, ok := obj.(*networkingv1alpha1.MultiClusterIngress)
	if !ok {
		return nil, nil
	}
	names := BackendServices(&mci.Spec.IngressSpec)
	keys := make([]string, 0, len(names))
	for _, n := range names {
		keys = append(keys, mci.Namespace+"/"+n)
	}
	return keys, nil
}

// Options tune the controller.
type Options struct {
	Clock    clock.Clock
	Metrics  *hubmetrics.Metrics
	Recorder record.EventRecorder
	// HostNamespaces say which namespaces may claim which domains
	// (--ingress-host-namespaces), as for the DNS outputs.
	HostNamespaces dnstraffic.DomainRules
}

// Controller keeps MultiClusterIngress status.
type Controller struct {
	opts      Options
	client    flotillaclient.Interface
	ingresses networkinglisters.MultiClusterIngressLister
	byHost    cache.Indexer
	bindings  worklisters.ResourceBindingLister
	// templates (indexed by pod labels and Service selectors) and
	// bindingIndex (by controlling template) find the workloads behind a
	// backend Service.
	templates    cache.Indexer
	bindingIndex cache.Indexer
	clusters     clusterlisters.ClusterLister
	synced       []cache.InformerSynced
	queue        workqueue.TypedRateLimitingInterface[string]
}

// NewController wires the controller to factory's informers.
func NewController(client flotillaclient.Interface, factory flotillainformers.SharedInformerFactory, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	ingresses := factory.Networking().V1alpha1().MultiClusterIngresses()
	bindings := factory.Work().V1alpha1().ResourceBindings()
	clusters := factory.Cluster().V1alpha1().Clusters()
	templates := factory.Work().V1alpha1().ResourceTemplates()
	// Before the factory starts; the only error is a second registration
	// of an index, which NewController never does.
	utilruntime.Must(dnstraffic.AddHostIndex(ingresses.Informer()))
	utilruntime.Must(ingresses.Informer().AddIndexers(cache.Indexers{backendIndex: backendIndexFunc}))
	utilruntime.Must(templates.Informer().AddIndexers(cache.Indexers{podLabelIndex: podLabelIndexFunc, serviceSelectorIndex: serviceSelectorIndexFunc}))
	workobjects.AddOwnerTemplateIndex(bindings.Informer())
	c := &Controller{opts: opts, client: client,
		ingresses: ingresses.Lister(), byHost: ingresses.Informer().GetIndexer(), bindings: bindings.Lister(), clusters: clusters.Lister(),
		templates: templates.Informer().GetIndexer(), bindingIndex: bindings.Informer().GetIndexer(),
		synced: []cache.InformerSynced{ingresses.Informer().HasSynced, bindings.Informer().HasSynced, clusters.Informer().HasSynced,
			templates.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "multicluster-ingress"}),
	}
	// Who owns a host changes when a claimant comes, goes or changes its
	// hosts, so those events re-evaluate every ingress sharing a host.
	_, _ = ingresses.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			c.enqueue(obj)
			c.enqueueClaimants(obj)
		},
		UpdateFunc: func(o, n any) {
			c.enqueue(n)
			if dnstraffic.HostsChanged(o, n) {
				c.enqueueClaimants(o)
				c.enqueueClaimants(n)
			}
		},
		DeleteFunc: func(obj any) {
			c.forget(obj)
			c.enqueueClaimants(obj)
		},
	})
	onBinding := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if rb, ok := obj.(*workv1alpha1.ResourceBinding); ok {
			c.enqueueFor(rb)
		}
	}
	_, _ = bindings.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onBinding,
		UpdateFunc: func(o, n any) {
			// A workload's binding changes often (every status report);
			// the traffic reads only its placement and health.
			if ob, ok := o.(*workv1alpha1.ResourceBinding); ok {
				if nb, ok := n.(*workv1alpha1.ResourceBinding); ok && isWorkload(nb.Spec.Resource.APIVersion, nb.Spec.Resource.Kind) &&
					sameWorkloadHealth(ob, nb) {
					return
				}
			}
			onBinding(n)
		},
		DeleteFunc: onBinding,
	})
	onTemplate := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if tmpl, ok := obj.(*workv1alpha1.ResourceTemplate); ok {
			c.enqueueForTemplate(tmpl)
		}
	}
	_, _ = templates.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onTemplate,
		UpdateFunc: func(o, n any) {
			ot, ok1 := o.(*workv1alpha1.ResourceTemplate)
			nt, ok2 := n.(*workv1alpha1.ResourceTemplate)
			if ok1 && ok2 && bytes.Equal(ot.Spec.Manifest.Raw, nt.Spec.Manifest.Raw) {
				return // a status write: selectors and labels are as they were
			}
			onTemplate(o) // what the old labels or selector selected
			onTemplate(n)
		},
		DeleteFunc: onTemplate,
	})
	_, _ = clusters.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.enqueueAll() },
		UpdateFunc: func(old, cur any) {
			o, n := old.(*clusterv1alpha1.Cluster), cur.(*clusterv1alpha1.Cluster)
			if readyStatus(o) != readyStatus(n) || !slices.Equal(o.Status.RemedyActions, n.Status.RemedyActions) {
				c.enqueueAll()
			}
		},
		DeleteFunc: func(any) { c.enqueueAll() },
	})
	return c
}

func readyStatus(c *clusterv1alpha1.Cluster) metav1.ConditionStatus {
	if cond := meta.FindStatusCondition(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady); cond != nil {
		return cond.Status
	}
	return ""
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

func (c *Controller) forget(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if mci, ok := obj.(*networkingv1alpha1.MultiClusterIngress); ok && c.opts.Metrics != nil {
		c.opts.Metrics.IngressBlockedClusters.DeleteLabelValues(mci.Namespace, mci.Name)
		c.opts.Metrics.IngressServingClusters.DeleteLabelValues(mci.Namespace, mci.Name)
	}
}

// enqueueClaimants queues the ingresses that claim a host of obj.
func (c *Controller) enqueueClaimants(obj any) {
	for _, other := range dnstraffic.SharingHosts(c.byHost, obj) {
		c.enqueue(other)
	}
}

// claimants are the ingresses sharing a host with mci, mci included: all
// that ownership of its hosts depends on (dnstraffic.Owners).
func (c *Controller) claimants(mci *networkingv1alpha1.MultiClusterIngress) ([]*networkingv1alpha1.MultiClusterIngress, error) {
	return dnstraffic.Claimants(c.byHost, mci)
}

func (c *Controller) enqueueAll() {
	list, _ := c.ingresses.List(labels.Everything())
	for _, mci := range list {
		c.enqueue(mci)
	}
}

// enqueueFor queues the ingresses of rb's namespace that rb's Service
// backs, whose member Ingress it binds, or whose backend Services select
// the pods of the workload it binds.
func (c *Controller) enqueueFor(rb *workv1alpha1.ResourceBinding) {
	switch kind, name := boundKind(rb); {
	case kind == kindService:
		c.enqueueBackedBy(rb.Namespace, name)
	case kind == kindIngress:
		c.queue.Add(rb.Namespace + "/" + name)
	case isWorkload(rb.Spec.Resource.APIVersion, rb.Spec.Resource.Kind):
		if tmpl := controllingTemplate(c.templates, rb); tmpl != nil {
			c.enqueueForTemplate(tmpl)
		}
	}
}

// enqueueForTemplate queues the ingresses a Service template backs, or
// whose backend Services select a workload template's pods.
func (c *Controller) enqueueForTemplate(tmpl *workv1alpha1.ResourceTemplate) {
	if name, _, ok := ServiceSelector(tmpl); name != "" || ok {
		c.enqueueBackedBy(tmpl.Namespace, name)
		return
	}
	if labels, ok := PodTemplateLabels(tmpl); ok {
		for _, svc := range SelectingServices(c.templates, tmpl.Namespace, labels) {
			c.enqueueBackedBy(tmpl.Namespace, svc)
		}
	}
}

// enqueueBackedBy queues the ingresses of namespace with backend Service svc.
func (c *Controller) enqueueBackedBy(namespace, svc string) {
	objs, _ := c.byHost.ByIndex(backendIndex, namespace+"/"+svc)
	for _, o := range objs {
		c.enqueue(o)
	}
}

// sameWorkloadHealth says whether a workload binding's update leaves what
// the traffic reads of it as it was: its clusters and its health on each.
func sameWorkloadHealth(o, n *workv1alpha1.ResourceBinding) bool {
	if (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) || !slices.EqualFunc(o.Spec.Clusters, n.Spec.Clusters,
		func(a, b workv1alpha1.TargetCluster) bool { return a.Name == b.Name }) || len(o.Status.AggregatedStatus) != len(n.Status.AggregatedStatus) {
		return false
	}
	for i := range o.Status.AggregatedStatus {
		a, b := &o.Status.AggregatedStatus[i], &n.Status.AggregatedStatus[i]
		if a.ClusterName != b.ClusterName || a.Health != b.Health {
			return false
		}
	}
	return true
}

const (
	kindService = "Service"
	kindIngress = "Ingress"
)

// boundKind says whether rb binds a core Service or a networking.k8s.io
// Ingress, and its name.
func boundKind(rb *workv1alpha1.ResourceBinding) (kind, name string) {
	r := rb.Spec.Resource
	if r.Namespace != "" && r.Namespace != rb.Namespace {
		return "", ""
	}
	switch {
	case r.APIVersion == "v1" && r.Kind == kindService:
		return kindService, r.Name
	case strings.HasPrefix(r.APIVersion, "networking.k8s.io/") && r.Kind == kindIngress:
		return kindIngress, r.Name
	}
	return "", ""
}

// Run works until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("multicluster-ingress", ctx.Done(), c.synced...) {
		return
	}
	queueworker.Run(ctx, "multicluster-ingress", c.queue, workers, c.sync)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	mci, err := c.ingresses.MultiClusterIngresses(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	in, err := c.inputs(mci)
	if err != nil {
		return err
	}
	d := Decide(&mci.Spec, in)
	if m := c.opts.Metrics; m != nil {
		m.IngressBlockedClusters.WithLabelValues(namespace, name).Set(float64(len(d.Status.TrafficBlockClusters)))
		m.IngressServingClusters.WithLabelValues(namespace, name).Set(float64(len(d.Serving)))
	}
	if equality.Semantic.DeepEqual(d.Status, mci.Status) {
		return nil
	}
	updated := mci.DeepCopy()
	updated.Status = d.Status
	if _, err := c.client.NetworkingV1alpha1().MultiClusterIngresses(namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing status of MultiClusterIngress %s: %w", key, err)
	}
	c.report(ctx, updated, mci.Status, d)
	return nil
}

func (c *Controller) inputs(mci *networkingv1alpha1.MultiClusterIngress) (Inputs, error) {
	in := Inputs{Services: map[string][]*workv1alpha1.ResourceBinding{}, Clusters: map[string]*clusterv1alpha1.Cluster{},
		Previous: &mci.Status, Now: metav1.NewTime(c.opts.Clock.Now()), Generation: mci.Generation}
	claimants, err := c.claimants(mci)
	if err != nil {
		return in, err
	}
	owners := dnstraffic.Owners(claimants, c.opts.HostNamespaces)
	in.HostConflicts, in.HostsNotAllowed = owners.Conflicts(dnstraffic.RefOf(mci)), owners.NotAllowed(dnstraffic.RefOf(mci))
	_, in.InvalidHosts = dnstraffic.HostKeys(&mci.Spec.IngressSpec)
	backends := BackendServices(&mci.Spec.IngressSpec)
	bindings, err := c.bindings.ResourceBindings(mci.Namespace).List(labels.Everything())
	if err != nil {
		return in, err
	}
	for _, rb := range bindings {
		if rb.DeletionTimestamp != nil {
			continue
		}
		switch kind, name := boundKind(rb); {
		case kind == kindService && slices.Contains(backends, name):
			in.Services[name] = append(in.Services[name], rb)
		case kind == kindIngress && name == mci.Name:
			in.Ingresses = append(in.Ingresses, rb)
		}
	}
	in.Workloads = WorkloadBindings(c.templates, c.bindingIndex, mci.Namespace, in.Services)
	clusters, err := c.clusters.List(labels.Everything())
	if err != nil {
		return in, err
	}
	for _, cl := range clusters {
		in.Clusters[cl.Name] = cl
	}
	return in, nil
}

// report logs and records what changed for the people running the ingress.
func (c *Controller) report(ctx context.Context, mci *networkingv1alpha1.MultiClusterIngress, before networkingv1alpha1.MultiClusterIngressStatus, d Decision) {
	names := func(l []networkingv1alpha1.ClusterObject) []string {
		out := make([]string, 0, len(l))
		for _, b := range l {
			out = append(out, b.Name)
		}
		return out
	}
	was, now := names(before.TrafficBlockClusters), names(d.Status.TrafficBlockClusters)
	klog.FromContext(ctx).Info("MultiClusterIngress traffic updated", "ingress", klog.KObj(mci),
		"serving", d.Serving, "blocked", now, "addresses", len(d.Status.LoadBalancer.Ingress), "failOpen", d.FailOpen)
	if c.opts.Recorder == nil {
		return
	}
	for _, n := range now {
		if !slices.Contains(was, n) {
			c.opts.Recorder.Eventf(mci, corev1.EventTypeWarning, EventTrafficBlocked, "traffic to cluster %s blocked: its remedy actions contain TrafficControl", n)
		}
	}
	for _, n := range was {
		if !slices.Contains(now, n) {
			c.opts.Recorder.Eventf(mci, corev1.EventTypeNormal, EventTrafficRestored, "traffic to cluster %s restored", n)
		}
	}
	prev := meta.FindStatusCondition(before.Conditions, networkingv1alpha1.ConditionHostsAdmitted)
	if cond := meta.FindStatusCondition(d.Status.Conditions, networkingv1alpha1.ConditionHostsAdmitted); cond != nil &&
		(prev == nil || prev.Status != cond.Status || prev.Reason != cond.Reason || prev.Message != cond.Message) {
		switch {
		case cond.Status == metav1.ConditionTrue && prev != nil && prev.Status == metav1.ConditionFalse:
			c.opts.Recorder.Event(mci, corev1.EventTypeNormal, EventHostsAdmitted, cond.Message)
		case cond.Reason == networkingv1alpha1.ReasonHostNotAllowed:
			c.opts.Recorder.Event(mci, corev1.EventTypeWarning, EventHostNotAllowed, cond.Message)
		case cond.Reason == networkingv1alpha1.ReasonHostConflict:
			c.opts.Recorder.Event(mci, corev1.EventTypeWarning, EventHostConflict, cond.Message)
		case cond.Reason == ReasonInvalidHost:
			c.opts.Recorder.Event(mci, corev1.EventTypeWarning, EventInvalidHost, cond.Message)
		}
	}
	if d.FailOpen {
		c.opts.Recorder.Eventf(mci, corev1.EventTypeWarning, EventFailOpen,
			"no backend cluster is Ready and unblocked; serving %s, which the hub cannot confirm, rather than nothing", strings.Join(d.Serving, ", "))
	}
}
