package testenv_test

import (
	"context"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// A user from UserConfig has only what RBAC grants: listing Works is
// forbidden until a Role allows it, and then only in that namespace.
func TestUserConfigIsLimitedByRBAC(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	user, err := versioned.NewForConfig(env.UserConfig(t, "agent-member1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := user.WorkV1alpha1().Works("flotilla-es-member1").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing Works without a Role: want Forbidden, got %v", err)
	}

	rbac := env.Kube.RbacV1()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "works-reader", Namespace: "default"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"work.flotilla.io"}, Resources: []string{"works"}, Verbs: []string{"list"}}},
	}
	if _, err := rbac.Roles("default").Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "works-reader", Namespace: "default"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "works-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "agent-member1"}},
	}
	if _, err := rbac.RoleBindings("default").Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC changes reach the authorizer through an informer: poll.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := user.WorkV1alpha1().Works("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("listing Works in default after the RoleBinding: %v", err)
	}
	if _, err := user.WorkV1alpha1().Works("flotilla-es-member2").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing Works in another namespace: want Forbidden, got %v", err)
	}
	if _, err := user.WorkV1alpha1().Works("default").Get(ctx, "w", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("get is not granted: want Forbidden, got %v", err)
	}
}
