package clustertaint

import (
	"fmt"
	"sort"
)

// Disruption says what part of the fleet the verdict sees disrupted, or ""
// when every region and the whole fleet are Normal. A verdict not yet
// evaluated counts as disrupted: nothing is known. It is read-only, for
// controllers that must not add load while the fleet is unwell (failback).
func (s GuardState) Disruption() string {
	if !s.Evaluated {
		return "the fleet guard has not judged the fleet yet"
	}
	if s.Mode != GuardNormal {
		return fmt.Sprintf("the fleet is in %s (%d of %d clusters not Ready)", s.Mode, s.NotReady, s.Total)
	}
	regions := make([]string, 0, len(s.Regions))
	for r := range s.Regions {
		regions = append(regions, r)
	}
	sort.Strings(regions)
	for _, r := range regions {
		if st := s.Regions[r]; st.Mode != GuardNormal {
			name := fmt.Sprintf("region %q", r)
			if r == "" {
				name = "the clusters without a region"
			}
			return fmt.Sprintf("%s: %s (%d of %d clusters not Ready)", name, st.Mode, st.NotReady, st.Total)
		}
	}
	return ""
}
