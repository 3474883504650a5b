package clustertaint

import (
	"testing"
	"time"
)

func TestGuardConfigMapRoundTrip(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := GuardState{Evaluated: true, Mode: GuardPartialDisruption, NotReady: 2, Total: 3,
		Regions: map[string]RegionState{"": {Mode: GuardNormal, Total: 1}, "eu": {Mode: GuardFullDisruption, NotReady: 2, Total: 2}}}
	data := GuardConfigMapData(s, at)
	g, err := ParseGuardConfigMap(data)
	if err != nil {
		t.Fatal(err)
	}
	if g.Mode != GuardPartialDisruption || g.NotReady != 2 || g.Total != 3 || !g.Since.Equal(at) ||
		g.Regions["eu"] != (PublishedRegion{Mode: GuardFullDisruption, NotReady: 2, Total: 2}) || g.Regions[""].Mode != GuardNormal {
		t.Errorf("round trip %+v", g)
	}
	// The same verdict later is the same verdict: no rewrite.
	if !sameVerdict(data, GuardConfigMapData(s, at.Add(time.Hour))) {
		t.Error("a later time alone counts as a new verdict")
	}
	for name, next := range map[string]GuardState{
		"mode":        {Evaluated: true, Mode: GuardNormal, NotReady: 2, Total: 3, Regions: s.Regions},
		"counts":      {Evaluated: true, Mode: GuardPartialDisruption, NotReady: 1, Total: 3, Regions: s.Regions},
		"region mode": {Evaluated: true, Mode: GuardPartialDisruption, NotReady: 2, Total: 3, Regions: map[string]RegionState{"": {Mode: GuardNormal, Total: 1}, "eu": {Mode: GuardNormal, Total: 2}}},
	} {
		if sameVerdict(data, GuardConfigMapData(next, at)) {
			t.Errorf("a change of %s is not a new verdict", name)
		}
	}
	for _, bad := range []map[string]string{nil, {GuardKeyMode: GuardNormal, GuardKeyRegions: "{"}} {
		if _, err := ParseGuardConfigMap(bad); err == nil {
			t.Errorf("ParseGuardConfigMap(%v) = nil error", bad)
		}
	}
}
