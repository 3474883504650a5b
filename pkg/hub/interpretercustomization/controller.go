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

// Package interpretercustomization says on each
// ResourceInterpreterCustomization whether its rules are in use: the
// Compiled condition, True, or False with the field whose expression does
// not compile or exceeds the cost budget (its kind then falls back to the
// built-in or generic interpretation). The webhook refuses such objects at
// `kubectl apply`; the condition covers what got in anyway (written before
// the webhook was installed, or while it was unavailable) and a rule that
// a newer hub judges differently.
package interpretercustomization

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	configlisters "github.com/flotilla-io/flotilla/pkg/generated/listers/config/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter/customization"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// Reasons of the Compiled condition.
const (
	ReasonCompiled = "Compiled"
	// ReasonInvalid: an expression does not compile, exceeds the cost
	// budget, or a path or the target is invalid.
	ReasonInvalid = "Invalid"
)

// maxMessage bounds the condition message in bytes (metav1.Condition
// allows 32768 characters).
const maxMessage = 4096

// Condition is the Compiled condition for ric: a pure function of its spec,
// computed from customization.Compile, the function whose Rules the hub and
// the agents use, so that True means exactly "in use".
func Condition(ric *configv1alpha1.ResourceInterpreterCustomization) metav1.Condition {
	c := metav1.Condition{Type: configv1alpha1.ConditionCompiled, Status: metav1.ConditionTrue, Reason: ReasonCompiled,
		Message: "every rule compiled within the cost budget", ObservedGeneration: ric.Generation}
	if _, errs := customization.Compile(ric); len(errs) > 0 {
		msgs := make([]string, 0, len(errs))
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		c.Status, c.Reason = metav1.ConditionFalse, ReasonInvalid
		// Cut on a character: the apiserver stores what it is given only
		// when it is valid UTF-8, and sync compares the stored message.
		c.Message = statuslimits.Truncate(fmt.Sprintf("not in use (%s %s falls back to the built-in interpretation): %s",
			ric.Spec.Target.APIVersion, ric.Spec.Target.Kind, strings.Join(msgs, "; ")), maxMessage)
	}
	return c
}

// Controller writes the Compiled condition.
type Controller struct {
	client   flotillaclient.Interface
	lister   configlisters.ResourceInterpreterCustomizationLister
	synced   cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	recorder record.EventRecorder
}

// NewController watches informer; recorder may be nil.
func NewController(client flotillaclient.Interface, informer cache.SharedIndexInformer, recorder record.EventRecorder) *Controller {
	c := &Controller{
		client: client, lister: configlisters.NewResourceInterpreterCustomizationLister(informer.GetIndexer()), synced: informer.HasSynced,
		recorder: recorder,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "interpreter-customization"}),
	}
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, cur any) {
			o, n := old.(*configv1alpha1.ResourceInterpreterCustomization), cur.(*configv1alpha1.ResourceInterpreterCustomization)
			if o.Generation != n.Generation || meta.FindStatusCondition(n.Status.Conditions, configv1alpha1.ConditionCompiled) == nil {
				enqueue(cur)
			}
		},
	})
	return c
}

// Run processes customizations with workers until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSync("interpreter-customization", ctx.Done(), c.synced) {
		return
	}
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for c.processNext(ctx) {
				}
			}, time.Second)
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		klog.FromContext(ctx).V(2).Info("Compiled condition not written; retrying", "customization", key, "err", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// sync writes the condition when it changes (never on a resync alone).
func (c *Controller) sync(ctx context.Context, name string) error {
	ric, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	want := Condition(ric)
	if cur := meta.FindStatusCondition(ric.Status.Conditions, want.Type); cur != nil && cur.Status == want.Status &&
		cur.Reason == want.Reason && cur.Message == want.Message && cur.ObservedGeneration == want.ObservedGeneration {
		return nil
	}
	updated := ric.DeepCopy()
	meta.SetStatusCondition(&updated.Status.Conditions, want)
	if _, err := c.client.ConfigV1alpha1().ResourceInterpreterCustomizations().UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if c.recorder != nil && want.Status == metav1.ConditionFalse {
		c.recorder.Event(ric, "Warning", want.Reason, want.Message)
	}
	return nil
}
