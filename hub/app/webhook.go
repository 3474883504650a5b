package app

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/flotilla-io/flotilla/pkg/healthserver"
	"github.com/flotilla-io/flotilla/pkg/hub/admission"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter/customization"
)

// WebhookOptions are the flags of the ResourceInterpreterCustomization
// admission webhook (pkg/hub/admission). Names follow controller-runtime's
// webhook server and Karmada's webhook where they exist.
type WebhookOptions struct {
	// Port serves the webhook over HTTPS; 0 serves none.
	Port int
	// BindAddress is the host the webhook listens on; "" is every address.
	BindAddress string
	// CertDir, when set, holds tls.crt and tls.key (reloaded when they
	// change), and the hub manages neither the Secret nor the caBundle:
	// whoever issues the certificate (cert-manager) injects its CA.
	CertDir string
	// ServiceName and ServiceNamespace name the Service in front of the
	// hub replicas: the serving certificate is for its DNS names. The
	// Secret SecretName lives in ServiceNamespace.
	ServiceName      string
	ServiceNamespace string
	SecretName       string
	// ConfigurationName is the ValidatingWebhookConfiguration whose
	// webhooks get the CA as caBundle.
	ConfigurationName string
}

// DefaultWebhookOptions are the defaults: no webhook (the shipped
// Deployment serves it on 9443; in-process hubs in tests need not), and
// the names of manifests/hub/webhook.yaml.
func DefaultWebhookOptions() WebhookOptions {
	return WebhookOptions{
		ServiceName:       "flotilla-hub-webhook",
		ServiceNamespace:  "flotilla-system",
		SecretName:        "flotilla-hub-webhook-cert",
		ConfigurationName: "flotilla-hub",
	}
}

// AddFlags registers the webhook flags.
func (o *WebhookOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Port, "webhook-port", o.Port,
		"Port serving the ResourceInterpreterCustomization validating admission webhook over HTTPS on every replica, leader or not (path "+admission.ValidatePath+"); 0 serves none. The shipped Deployment uses 9443.")
	fs.StringVar(&o.BindAddress, "webhook-bind-address", o.BindAddress, "Host the webhook listens on; empty is every address.")
	fs.StringVar(&o.CertDir, "webhook-cert-dir", o.CertDir,
		"Directory holding the webhook's tls.crt and tls.key (reloaded when they change), e.g. a mounted cert-manager Secret; then the hub neither keeps --webhook-secret-name nor sets the caBundle of --webhook-configuration-name. Empty: the hub keeps a self-signed CA and serving certificate in that Secret and sets the caBundle itself.")
	fs.StringVar(&o.ServiceName, "webhook-service-name", o.ServiceName, "Service in front of the hub's webhook: the serving certificate is for <name>.<namespace>.svc (and .svc.cluster.local), localhost and 127.0.0.1.")
	fs.StringVar(&o.ServiceNamespace, "webhook-service-namespace", o.ServiceNamespace, "Namespace of the webhook Service and of the Secret --webhook-secret-name.")
	fs.StringVar(&o.SecretName, "webhook-secret-name", o.SecretName, "Secret (in --webhook-service-namespace) where the hub keeps the webhook's CA and serving certificate, shared by every replica; created when missing, renewed before expiry.")
	fs.StringVar(&o.ConfigurationName, "webhook-configuration-name", o.ConfigurationName, "ValidatingWebhookConfiguration whose webhooks the hub gives its CA (caBundle); it is never created by the hub, only patched.")
}

// Validate checks the webhook flags.
func (o *WebhookOptions) Validate() error {
	if o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("--webhook-port must be in [0, 65535]")
	}
	if o.Port == 0 || o.CertDir != "" {
		return nil
	}
	for flag, name := range map[string]string{"--webhook-service-name": o.ServiceName, "--webhook-secret-name": o.SecretName,
		"--webhook-service-namespace": o.ServiceNamespace, "--webhook-configuration-name": o.ConfigurationName} {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return fmt.Errorf("%s %q: %v", flag, name, errs)
		}
	}
	return nil
}

// certDirPeriod is how often --webhook-cert-dir is read again.
const certDirPeriod = 10 * time.Second

// startWebhook starts the webhook server and, unless --webhook-cert-dir
// is set, the CertController, until ctx ends. A serving error is sent on
// the returned channel after cancelling the hub.
func startWebhook(ctx context.Context, cancel context.CancelFunc, o WebhookOptions, clients *clientBuilder,
	health *healthserver.Server, registry prometheus.Registerer) (<-chan error, error) {
	errs := make(chan error, 1)
	if o.Port == 0 {
		return errs, nil
	}
	metrics := admission.NewMetrics(registry)
	certs := admission.NewCertificates(metrics)
	if o.CertDir != "" {
		if err := certs.WatchDir(ctx, o.CertDir, certDirPeriod); err != nil {
			return nil, err
		}
	} else {
		ctl := admission.NewCertController(clients.kube("webhook-certificate"), certs, admission.CertOptions{
			Namespace: o.ServiceNamespace, SecretName: o.SecretName, Hosts: admission.ServingHosts(o.ServiceName, o.ServiceNamespace),
			WebhookConfigurationName: o.ConfigurationName, Metrics: metrics,
		})
		go ctl.Run(klog.NewContext(ctx, klog.LoggerWithName(klog.FromContext(ctx), "webhook-certificate")))
	}
	health.AddReadyzCheck("webhook", func(context.Context) error { return certs.Ready() })
	server := admission.NewServer(net.JoinHostPort(o.BindAddress, strconv.Itoa(o.Port)), admission.NewHandler(validateCustomization, metrics), certs)
	go func() {
		if err := server.Run(ctx); err != nil {
			errs <- err
			cancel()
		}
	}()
	return errs, nil
}

// validateCustomization is what the webhook calls: compiling every rule in
// Kubernetes' CEL environment against the cost budget, plus the semantic
// checks (pkg/resourceinterpreter/customization).
var validateCustomization admission.ValidateFunc = customization.Validate
