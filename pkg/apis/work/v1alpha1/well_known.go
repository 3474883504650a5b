package v1alpha1

// Labels, annotations and finalizers Flotilla puts on objects.
const (
	// LabelManaged marks a member object (or namespace) Flotilla applied.
	// The agent never deletes or changes a member object without it.
	LabelManaged = "flotilla.io/managed"
	// AnnotationWorkNamespace and AnnotationWorkName name the hub Work a
	// member object was applied from.
	AnnotationWorkNamespace = "work.flotilla.io/namespace"
	AnnotationWorkName      = "work.flotilla.io/name"
	// AnnotationManifestHash is the hash of the manifest last applied to a
	// member object, so a manifest change (including a removed field) is
	// told apart from a live object that already matches.
	AnnotationManifestHash = "work.flotilla.io/manifest-hash"

	// ExecutionFinalizer holds a Work until the agent has removed (or
	// released) the member objects it applied from it.
	ExecutionFinalizer = "flotilla.io/execution"
)
