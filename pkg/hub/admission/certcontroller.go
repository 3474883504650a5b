package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// CertOptions name what the CertController keeps.
type CertOptions struct {
	// Namespace holds the Secret (and the webhook Service).
	Namespace string
	// SecretName is the Secret holding the CA and the serving certificate.
	SecretName string
	// Hosts are the serving certificate's names (ServingHosts).
	Hosts Hosts
	// WebhookConfigurationName is the ValidatingWebhookConfiguration whose
	// webhooks get the CA as caBundle.
	WebhookConfigurationName string
	// Metrics may be nil.
	Metrics *Metrics
	// Clock defaults to the real one.
	Clock clock.WithTicker
}

// CertController keeps the webhook's serving certificate: it gets or
// creates the Secret holding a self-signed CA and a serving certificate of
// that CA, renews them before they expire (PlanSecret), loads the
// certificate into Certificates, and makes every webhook of the
// ValidatingWebhookConfiguration trust the CA (caBundle), putting it back
// when it is changed or removed. Every hub replica runs one (the webhook is
// served by all of them, leader or not); they agree through the Secret:
// the first create wins, an update on a stale copy is refused (conflict)
// and the loser loads the winner's certificate.
//
// It reads both objects through watches of that one name (list/watch with
// a metadata.name field selector), so its RBAC names them
// (manifests/hub/rbac.yaml).
type CertController struct {
	client kubernetes.Interface
	certs  *Certificates
	opts   CertOptions
	clock  clock.WithTicker

	secretFactory, webhookFactory informers.SharedInformerFactory
	secrets                       corelisters.SecretNamespaceLister
	webhooks                      admissionlisters.ValidatingWebhookConfigurationLister
	synced                        []cache.InformerSynced
	queue                         workqueue.TypedRateLimitingInterface[string]
}

// NewCertController returns a controller loading into certs.
func NewCertController(client kubernetes.Interface, certs *Certificates, opts CertOptions) *CertController {
	c := &CertController{client: client, certs: certs, opts: opts, clock: opts.Clock}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	byName := func(name string) informers.SharedInformerOption {
		return informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
	}
	c.secretFactory = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(opts.Namespace), byName(opts.SecretName))
	c.webhookFactory = informers.NewSharedInformerFactoryWithOptions(client, 0, byName(opts.WebhookConfigurationName))
	secrets := c.secretFactory.Core().V1().Secrets()
	webhooks := c.webhookFactory.Admissionregistration().V1().ValidatingWebhookConfigurations()
	c.secrets = secrets.Lister().Secrets(opts.Namespace)
	c.webhooks = webhooks.Lister()
	c.synced = []cache.InformerSynced{secrets.Informer().HasSynced, webhooks.Informer().HasSynced}
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "webhook-certificate", Clock: c.clock})
	enqueue := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.queue.Add(queueKey) },
		UpdateFunc: func(any, any) { c.queue.Add(queueKey) },
		DeleteFunc: func(any) { c.queue.Add(queueKey) },
	}
	_, _ = secrets.Informer().AddEventHandler(enqueue)
	_, _ = webhooks.Informer().AddEventHandler(enqueue)
	return c
}

// queueKey is the queue's only key: there is one Secret and one
// configuration.
const queueKey = "webhook"

// Run reconciles until ctx ends.
func (c *CertController) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	c.secretFactory.Start(ctx.Done())
	c.webhookFactory.Start(ctx.Done())
	defer c.secretFactory.Shutdown()
	defer c.webhookFactory.Shutdown()
	if !cache.WaitForNamedCacheSync("webhook-certificate", ctx.Done(), c.synced...) {
		return
	}
	c.queue.Add(queueKey)
	go func() { <-ctx.Done(); c.queue.ShutDown() }()
	for c.processNext(ctx) {
	}
}

func (c *CertController) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	next, err := c.Reconcile(ctx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Webhook serving certificate", "secret", klog.KRef(c.opts.Namespace, c.opts.SecretName),
			"validatingWebhookConfiguration", c.opts.WebhookConfigurationName)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	if next > 0 {
		c.queue.AddAfter(key, next)
	}
	return true
}

// Reconcile makes the Secret, the served certificate and the caBundle
// agree; it returns when to look again (the next renewal), 0 for when
// something changes.
func (c *CertController) Reconcile(ctx context.Context) (time.Duration, error) {
	now := c.clock.Now()
	secret, err := c.secrets.Get(c.opts.SecretName)
	if apierrors.IsNotFound(err) {
		data, issued, _, err := PlanSecret(nil, c.opts.Hosts, now)
		if err != nil {
			return 0, err
		}
		_, err = c.client.CoreV1().Secrets(c.opts.Namespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: c.opts.SecretName, Namespace: c.opts.Namespace,
				Labels: map[string]string{"app.kubernetes.io/part-of": "flotilla", "app.kubernetes.io/managed-by": "flotilla-hub"}},
			Type: corev1.SecretTypeTLS,
			Data: data,
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return 0, nil // another replica's (or our own): the watch brings it
		}
		if err != nil {
			return 0, fmt.Errorf("creating Secret %s/%s: %w", c.opts.Namespace, c.opts.SecretName, err)
		}
		c.countIssued(issued)
		klog.FromContext(ctx).Info("Created the webhook's CA and serving certificate", "secret", klog.KRef(c.opts.Namespace, c.opts.SecretName))
		return 0, nil // the watch brings it; loaded then
	}
	if err != nil {
		return 0, err
	}
	data, issued, renewAt, err := PlanSecret(secret.Data, c.opts.Hosts, now)
	if err != nil {
		return 0, err
	}
	if !SameSecretData(data, secret.Data) {
		next := secret.DeepCopy()
		if next.Data == nil {
			next.Data = map[string][]byte{}
		}
		for k, v := range data {
			next.Data[k] = v
		}
		if _, err := c.client.CoreV1().Secrets(c.opts.Namespace).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) {
				return 0, nil // another replica renewed it: the watch brings its certificate
			}
			return 0, fmt.Errorf("renewing Secret %s/%s: %w", c.opts.Namespace, c.opts.SecretName, err)
		}
		c.countIssued(issued)
		klog.FromContext(ctx).Info("Renewed the webhook's certificates", "secret", klog.KRef(c.opts.Namespace, c.opts.SecretName),
			"ca", issued.CA, "certificate", issued.Certificate)
		return 0, nil
	}
	if err := c.certs.Set(data["tls.crt"], data["tls.key"]); err != nil {
		return 0, err
	}
	if err := c.ensureCABundle(ctx, data[CACertKey]); err != nil {
		return 0, err
	}
	return max(renewAt.Sub(now), time.Second), nil
}

func (c *CertController) countIssued(issued Issued) {
	if issued.CA {
		c.opts.Metrics.issued("ca")
	}
	if issued.Certificate {
		c.opts.Metrics.issued("certificate")
	}
}

// ensureCABundle sets caBundle on every webhook of the configuration that
// lacks it, with a JSON patch that fails if the webhooks moved since the
// cache saw them. A configuration that does not exist is not made (the
// hub may only patch that one object): the watch brings it once an admin
// applies it.
func (c *CertController) ensureCABundle(ctx context.Context, caBundle []byte) error {
	vwc, err := c.webhooks.Get(c.opts.WebhookConfigurationName)
	if apierrors.IsNotFound(err) {
		klog.FromContext(ctx).V(2).Info("No ValidatingWebhookConfiguration to give the webhook's CA", "name", c.opts.WebhookConfigurationName)
		return nil
	}
	if err != nil {
		return err
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	var patch []op
	for i, wh := range vwc.Webhooks {
		if bytes.Equal(wh.ClientConfig.CABundle, caBundle) {
			continue
		}
		patch = append(patch,
			op{Op: "test", Path: fmt.Sprintf("/webhooks/%d/name", i), Value: wh.Name},
			op{Op: "add", Path: fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), Value: caBundle})
	}
	if len(patch) == 0 {
		return nil
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = c.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, vwc.Name, types.JSONPatchType, body, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("setting caBundle on ValidatingWebhookConfiguration %s: %w", vwc.Name, err)
	}
	klog.FromContext(ctx).Info("Set the webhook's CA on the ValidatingWebhookConfiguration", "name", vwc.Name, "webhooks", len(patch)/2)
	return nil
}
