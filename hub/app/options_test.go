package app

import "testing"

func TestValidateDNSEndpointWeightProperty(t *testing.T) {
	for _, tc := range []struct {
		publishing bool
		property   string
		ok         bool
	}{
		{publishing: false, property: "", ok: true},
		{publishing: true, property: "", ok: true},
		{publishing: true, property: "aws/weight", ok: true},
		{publishing: false, property: "aws/weight"},
		{publishing: true, property: "aws/ weight"},
	} {
		o := NewOptions()
		o.DNSEndpointPublishing, o.DNSEndpointWeightProperty = tc.publishing, tc.property
		if err := o.Validate(); (err == nil) != tc.ok {
			t.Errorf("publishing=%v property=%q: Validate() = %v, want ok=%v", tc.publishing, tc.property, err, tc.ok)
		}
	}
}

func TestValidateWebhook(t *testing.T) {
	for _, tc := range []struct {
		name string
		tune func(*WebhookOptions)
		ok   bool
	}{
		{"off by default", func(*WebhookOptions) {}, true},
		{"on", func(o *WebhookOptions) { o.Port = 9443 }, true},
		{"port out of range", func(o *WebhookOptions) { o.Port = 70000 }, false},
		{"negative port", func(o *WebhookOptions) { o.Port = -1 }, false},
		{"bad secret name", func(o *WebhookOptions) { o.Port, o.SecretName = 9443, "Not_A_Name" }, false},
		{"no service name", func(o *WebhookOptions) { o.Port, o.ServiceName = 9443, "" }, false},
		{"own certificates need no names", func(o *WebhookOptions) { o.Port, o.CertDir, o.ServiceName = 9443, "/certs", "" }, true},
	} {
		o := NewOptions()
		tc.tune(&o.Webhook)
		if err := o.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
