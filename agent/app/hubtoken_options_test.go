package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/agent/app"
)

func TestHubTokenOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*app.Options)
		want   string // substring of the error; "": valid
	}{
		{"defaults", func(*app.Options) {}, ""},
		{"renew fraction 0", func(o *app.Options) { o.HubTokenRenewFraction = 0 }, "--hub-token-renew-fraction"},
		{"renew fraction 1", func(o *app.Options) { o.HubTokenRenewFraction = 1 }, "--hub-token-renew-fraction"},
		{"renew fraction 0.05", func(o *app.Options) { o.HubTokenRenewFraction = 0.05 }, ""},
		{"expiration under TokenRequest's minimum", func(o *app.Options) { o.HubTokenExpiration = 5 * time.Minute }, "--hub-token-expiration"},
		{"expiration 10m", func(o *app.Options) { o.HubTokenExpiration = 10 * time.Minute }, ""},
		{"no persistence", func(o *app.Options) { o.HubTokenSecret, o.HubTokenFile = "", "" }, ""},
	} {
		o := validOptions()
		tc.mutate(o)
		err := o.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.want)
		}
	}
	if o := app.NewOptions(); o.HubTokenRenewFraction != 0.8 || o.HubTokenSecret != "flotilla-agent-hub-token" || o.HubTokenExpiration != 0 {
		t.Errorf("hub token defaults changed: %+v", o)
	}
}
