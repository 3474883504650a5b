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
