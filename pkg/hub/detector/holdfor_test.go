package detector

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/bindingstatus"
)

func TestHoldFor(t *testing.T) {
	const base = 30 * time.Second
	unshown := &workv1alpha1.ResourceBinding{}
	shown := &workv1alpha1.ResourceBinding{Status: workv1alpha1.ResourceBindingStatus{Conditions: []metav1.Condition{
		{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue, Reason: "BindingScheduled"}}}}
	if d, hub := holdFor(base, unshown); d != unshownHoldFactor*base || !hub {
		t.Errorf("binding with no status: %v, %v; want %v, true", d, hub, unshownHoldFactor*base)
	}
	if d, hub := holdFor(base, shown); d != base || hub {
		t.Errorf("binding showing a status: %v, %v; want %v, false", d, hub, base)
	}
	// The template's bound must outlast the binding's own (which starts
	// later, when the scheduler submits its part): the binding decides.
	if unshownHoldFactor <= bindingstatus.MaxBehindFactor {
		t.Errorf("unshownHoldFactor %d is not above the binding's own bound, %d holds", unshownHoldFactor, bindingstatus.MaxBehindFactor)
	}
}
