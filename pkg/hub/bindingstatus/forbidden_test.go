package bindingstatus

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/flotilla-io/flotilla/pkg/hub/forbidden"
)

// A status write the apiserver refuses for want of a permission is a
// Warning event on the binding naming the verb, and a denial (for the
// detector to show on the template) until a write succeeds. Other errors
// are neither.
func TestRefusedStatusWriteIsAnEventAndADenial(t *testing.T) {
	b := newBinding()
	e := newEnv(t, b)
	recorder := record.NewFakeRecorder(10)
	denials := forbidden.NewDenials()
	var notified []string
	denials.OnChange(func(key string) { notified = append(notified, key) })
	e.w.WithRecorder(recorder).WithDenials(denials)

	var refuse error
	e.client.PrependReactor("patch", "resourcebindings", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse != nil {
			return true, nil, refuse
		}
		return false, nil, nil
	})
	refuse = errors.New("apiserver unavailable")
	if err := e.w.Write(e.ctx, b, "scheduler", scheduledPart("first"), Settled); err == nil {
		t.Fatal("want the write's error")
	}
	if _, ok := denials.Get("ns/app-deployment"); ok || len(recorder.Events) != 0 {
		t.Fatalf("an unavailable apiserver is not a missing permission: denial recorded or event %d", len(recorder.Events))
	}

	refuse = apierrors.NewForbidden(schema.GroupResource{Group: "work.flotilla.io", Resource: "resourcebindings"}, "app-deployment",
		errors.New(`User "system:serviceaccount:flotilla-system:flotilla-hub" cannot patch resource "resourcebindings/status" in API group "work.flotilla.io" in the namespace "ns"`))
	if err := e.w.Write(e.ctx, b, "scheduler", scheduledPart("second"), Settled); !apierrors.IsForbidden(err) {
		t.Fatalf("Write = %v, want the Forbidden error (retried)", err)
	}
	d, ok := denials.Get("ns/app-deployment")
	if !ok || d.Verb != "patch" || d.Resource != "resourcebindings/status" {
		t.Fatalf("denial = %+v, %v", d, ok)
	}
	select {
	case ev := <-recorder.Events:
		if !strings.HasPrefix(ev, "Warning Forbidden ") || !strings.Contains(ev, "patch resourcebindings/status") {
			t.Errorf("event %q, want a Warning Forbidden naming patch resourcebindings/status", ev)
		}
	default:
		t.Error("no event for the refused write")
	}

	refuse = nil
	if err := e.w.Write(e.ctx, b, "scheduler", scheduledPart("third"), Settled); err != nil {
		t.Fatal(err)
	}
	if _, ok := denials.Get("ns/app-deployment"); ok {
		t.Error("the denial outlived a successful write")
	}
	if strings.Join(notified, ",") != "ns/app-deployment,ns/app-deployment" {
		t.Errorf("notified %v, want the binding twice (refused, then allowed)", notified)
	}
}
