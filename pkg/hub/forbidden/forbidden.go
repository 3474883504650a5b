// Package forbidden makes a write the apiserver refused the hub for want of
// a permission surface as what it is. The hub's role (manifests/hub/rbac.yaml)
// must hold every verb its controllers use; when it does not (an install
// with an older or hand-narrowed role), the write fails with 403 and, unless
// someone says so, the user sees a symptom far away from the cause: a
// template that says no policy matches it, a binding that never shows a
// status.
//
// Three pieces, one per audience:
//   - Parse reads the missing verb and resource out of the apiserver's
//     authorization error (an admission refusal, e.g. a namespace being
//     deleted, is not a missing permission and is not reported);
//   - Transport counts every refused write of the hub's clients in
//     flotilla_hub_forbidden_writes_total{resource,verb}, whichever
//     controller made it;
//   - Denials remembers, per object, a write that was refused, so that a
//     controller other than the writer can say so on an object it can
//     still write (the detector, on the template, for a refused binding
//     status).
//
// The controllers record a Warning event with reason EventReason on the
// object and, where the object has a condition for it, set reason
// ReasonPermissionDenied with Denial.Message.
package forbidden

import (
	"errors"
	"fmt"
	"regexp"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

const (
	// EventReason is the reason of the Warning event recorded on an object
	// whose write was refused.
	EventReason = "Forbidden"
	// ReasonPermissionDenied is the reason of a condition that says the
	// hub may not make a write it needs.
	ReasonPermissionDenied = "PermissionDenied"
	// Role names the role that must grant the hub what it lacks.
	Role = "ClusterRole flotilla:hub (manifests/hub/rbac.yaml)"
)

// Denial is one permission the apiserver refused.
type Denial struct {
	// Verb is the authorization verb (create, update, patch, delete…).
	Verb string
	// Resource is the resource, with its subresource after a slash
	// (resourcebindings/status).
	Resource string
	// Group is the API group ("" for the core group).
	Group string
	// Namespace is where it was refused; "" at the cluster scope.
	Namespace string
	// User is the identity the apiserver refused.
	User string
}

// authzMessage is the apiserver's authorization refusal
// (k8s.io/apiserver/pkg/endpoints/handlers/responsewriters.forbiddenMessage).
var authzMessage = regexp.MustCompile(`User "([^"]*)" cannot (\S+) resource "([^"]+)" in API group "([^"]*)"(?: in the namespace "([^"]*)")?`)

// Parse reports whether err is an authorization refusal (403 for want of
// RBAC permission) and, if so, which one.
func Parse(err error) (Denial, bool) {
	if err == nil || !apierrors.IsForbidden(err) {
		return Denial{}, false
	}
	var status apierrors.APIStatus
	msg := err.Error()
	if errors.As(err, &status) {
		msg = status.Status().Message
	}
	return ParseMessage(msg)
}

// ParseMessage is Parse for the message of a 403 Status.
func ParseMessage(msg string) (Denial, bool) {
	m := authzMessage.FindStringSubmatch(msg)
	if m == nil {
		return Denial{}, false
	}
	return Denial{User: m[1], Verb: m[2], Resource: m[3], Group: m[4], Namespace: m[5]}, true
}

// Permission is the missing permission, as RBAC spells it: "patch
// resourcebindings/status in API group work.flotilla.io".
func (d Denial) Permission() string {
	group := d.Group
	if group == "" {
		group = `"" (core)`
	}
	s := fmt.Sprintf("%s %s in API group %s", d.Verb, d.Resource, group)
	if d.Namespace != "" {
		s += fmt.Sprintf(" in namespace %s", d.Namespace)
	}
	return s
}

// Message says what was refused, what it stops (effect, e.g. "the
// binding's status is not written"), and what to grant.
func (d Denial) Message(effect string) string {
	msg := "the apiserver refused the hub " + d.Permission()
	if effect != "" {
		msg += ": " + effect
	}
	return msg + "; grant the verb to the hub's " + Role
}

// Write reports whether the verb writes (what flotilla_hub_forbidden_writes_total counts).
func Write(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Denials remembers, per object key, the last write of it the apiserver
// refused, until a write of it succeeds. The zero value is ready; a nil
// *Denials remembers nothing.
type Denials struct {
	mu       sync.Mutex
	of       map[string]Denial
	onChange []func(key string)
}

// NewDenials returns an empty Denials.
func NewDenials() *Denials { return &Denials{} }

// OnChange calls fn (outside any lock) with the key of every object whose
// denial appears, changes or goes.
func (d *Denials) OnChange(fn func(key string)) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.onChange = append(d.onChange, fn)
}

// Refused records that a write of key was refused.
func (d *Denials) Refused(key string, denial Denial) {
	if d == nil {
		return
	}
	d.mu.Lock()
	if d.of == nil {
		d.of = map[string]Denial{}
	}
	prev, had := d.of[key]
	d.of[key] = denial
	fns := d.onChange
	d.mu.Unlock()
	if !had || prev != denial {
		for _, fn := range fns {
			fn(key)
		}
	}
}

// Allowed records that a write of key succeeded (or that key is gone).
func (d *Denials) Allowed(key string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	_, had := d.of[key]
	delete(d.of, key)
	fns := d.onChange
	d.mu.Unlock()
	if had {
		for _, fn := range fns {
			fn(key)
		}
	}
}

// Get returns the denial recorded for key.
func (d *Denials) Get(key string) (Denial, bool) {
	if d == nil {
		return Denial{}, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	den, ok := d.of[key]
	return den, ok
}
