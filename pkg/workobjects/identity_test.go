package workobjects

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// Identity reads what Object reads, and refuses what Object refuses.
func TestIdentityAgreesWithObject(t *testing.T) {
	for _, raw := range []string{
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"apps"},"spec":{"replicas":2}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings"}}`,
		`{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"team-a","labels":{"a":"b"}}}`,
		`{"apiVersion":"v1","Kind":"ConfigMap","metadata":{"name":"wrong-case"}}`,
		`{"apiVersion":"v1","metadata":{"name":"no-kind"}}`,
		`[1,2]`,
		`{`,
		``,
	} {
		for _, ns := range []string{"apps", ""} {
			tmpl := &workv1alpha1.ResourceTemplate{}
			tmpl.Namespace = ns
			tmpl.Spec.Manifest = workv1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(raw)}}
			obj, objErr := Object(tmpl)
			id, idErr := Identity(tmpl)
			if (objErr == nil) != (idErr == nil) {
				t.Errorf("%s in %q: Object error %v, Identity error %v", raw, ns, objErr, idErr)
				continue
			}
			if objErr != nil {
				continue
			}
			if id.APIVersion != obj.GetAPIVersion() || id.Kind != obj.GetKind() || id.Metadata.Name != obj.GetName() || id.Metadata.Namespace != obj.GetNamespace() {
				t.Errorf("%s in %q: Identity %+v, Object %s %s %s/%s", raw, ns, id, obj.GetAPIVersion(), obj.GetKind(), obj.GetNamespace(), obj.GetName())
			}
		}
	}
}
