package resourceinterpreter

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// BuiltIn is the built-in interpreter as a value, for code that takes an
// interpreter as an interface (render.ReplicaReviser): only the kinds
// Flotilla knows, no customization.
type BuiltIn struct{}

// ReviseReplica sets obj's replica count to n, for the built-in kinds that
// have one (ReviseReplica).
func (BuiltIn) ReviseReplica(obj *unstructured.Unstructured, n int32) error {
	return ReviseReplica(obj, n)
}
