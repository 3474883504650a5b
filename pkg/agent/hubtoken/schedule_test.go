package hubtoken

import (
	"testing"
	"time"
)

func TestRenewAt(t *testing.T) {
	day := saToken(t, "u", t0, t0.Add(24*time.Hour))
	cases := []struct {
		name     string
		tok      Token
		fraction float64
		seen     time.Time
		want     time.Time
	}{
		{"24h token at the default 80%", day, DefaultRenewFraction, t0.Add(time.Hour), t0.Add(19*time.Hour + 12*time.Minute)},
		{"counts from issue, not from when the agent read it", day, 0.5, t0.Add(20 * time.Hour), t0.Add(12 * time.Hour)},
		{"10m token at 80%", saToken(t, "u", t0, t0.Add(10*time.Minute)), 0.8, t0, t0.Add(8 * time.Minute)},
		{"unknown issue time counts from when seen", Token{Raw: "x", Expiry: t0.Add(10 * time.Hour)}, 0.5, t0, t0.Add(5 * time.Hour)},
	}
	for _, tc := range cases {
		if got := RenewAt(tc.tok, tc.fraction, tc.seen); !got.Equal(tc.want) {
			t.Errorf("%s: RenewAt = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestRetryDelay(t *testing.T) {
	cases := []struct {
		failures  int
		remaining time.Duration
		want      time.Duration
	}{
		{1, 4 * time.Hour, time.Second},
		{2, 4 * time.Hour, 2 * time.Second},
		{5, 4 * time.Hour, 16 * time.Second},
		{9, 4 * time.Hour, 256 * time.Second},
		{10, 4 * time.Hour, 5 * time.Minute}, // capped
		{1000, 4 * time.Hour, 5 * time.Minute},
		{10, 2 * time.Minute, 30 * time.Second},  // a quarter of what remains
		{10, 2 * time.Second, time.Second},       // never below 1s
		{10, -time.Hour, 5 * time.Minute},        // expired: slow retries
		{0, 4 * time.Hour, time.Second},          // defensive: no failure yet
		{64, 4 * time.Hour, 5 * time.Minute},     // no shift overflow
		{3, 10 * time.Minute, 4 * time.Second},   // 10m token: still doubling
		{8, 100 * time.Second, 25 * time.Second}, // near expiry retries tighten
	}
	for _, tc := range cases {
		if got := RetryDelay(tc.failures, tc.remaining); got != tc.want {
			t.Errorf("RetryDelay(%d, %s) = %s, want %s", tc.failures, tc.remaining, got, tc.want)
		}
	}
	// Enough attempts fit between the renewal point and the expiry of the
	// shortest token TokenRequest grants.
	remaining, attempts := 2*time.Minute, 0 // 10m token renewed at 80%
	for n := 1; remaining > 0; n++ {
		remaining -= RetryDelay(n, remaining)
		attempts++
	}
	if attempts < 6 {
		t.Errorf("only %d attempts before a 10m token expires", attempts)
	}
}

func TestExpiringSoon(t *testing.T) {
	day := saToken(t, "u", t0, t0.Add(24*time.Hour))
	for _, tc := range []struct {
		now  time.Time
		want bool
	}{
		{t0.Add(19*time.Hour + 12*time.Minute), false}, // renewal is due
		{t0.Add(21 * time.Hour), false},
		{t0.Add(21*time.Hour + 36*time.Minute), true}, // 2.4h before expiry
		{t0.Add(25 * time.Hour), true},
	} {
		if got := ExpiringSoon(day, DefaultRenewFraction, t0, tc.now); got != tc.want {
			t.Errorf("ExpiringSoon at %s = %v, want %v", tc.now.Sub(t0), got, tc.want)
		}
	}
}

func TestRequestedLifetime(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tok        Token
		configured time.Duration
		want       time.Duration
	}{
		{"same as the token replaced", saToken(t, "u", t0, t0.Add(24*time.Hour)), 0, 24 * time.Hour},
		{"the flag wins", saToken(t, "u", t0, t0.Add(24*time.Hour)), 2 * time.Hour, 2 * time.Hour},
		{"never below TokenRequest's minimum", saToken(t, "u", t0, t0.Add(45*time.Second)), 0, MinLifetime},
		{"odd lifetimes round to seconds", saToken(t, "u", t0, t0.Add(3607*time.Second)), 0, 3607 * time.Second},
	} {
		if got := RequestedLifetime(tc.tok, tc.configured, t0); got != tc.want {
			t.Errorf("%s: RequestedLifetime = %s, want %s", tc.name, got, tc.want)
		}
	}
}
