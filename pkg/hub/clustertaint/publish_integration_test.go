package clustertaint_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// The hub publishes the fleet guard's verdict in flotilla-system's
// ConfigMap flotilla-fleet-guard, as the hub's ServiceAccount with the
// shipped RBAC (manifests/hub): it appears with the mode, follows a change
// of verdict, is not rewritten while the verdict holds, and comes back
// after it is deleted.
func TestFleetGuardVerdictIsPublished(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flotilla-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"serviceaccount.yaml", "rbac.yaml"} {
		if err := env.ApplyFile(ctx, filepath.Join(env.Root, "manifests", "hub", f)); err != nil {
			t.Fatal(err)
		}
	}
	hubCfg := rest.CopyConfig(env.Config)
	hubCfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:flotilla-system:flotilla-hub",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:flotilla-system", "system:authenticated"}}
	admin := flotillaclient.NewForConfigOrDie(env.Config)
	for _, c := range []struct{ name, region string }{{"m1", "eu"}, {"m2", "eu"}, {"m3", "us"}} {
		created, err := admin.ClusterV1alpha1().Clusters().Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: c.name},
			Spec: clusterv1alpha1.ClusterSpec{Region: c.region}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		publishTestSetReady(t, admin, created, metav1.ConditionTrue)
	}

	hubFlotilla := flotillaclient.NewForConfigOrDie(hubCfg)
	factory := flotillainformers.NewSharedInformerFactory(hubFlotilla, 0)
	recorder := record.NewFakeRecorder(1000)
	ctl := clustertaint.NewController(hubFlotilla, factory.Cluster().V1alpha1().Clusters().Informer(),
		factory.Cluster().V1alpha1().ClusterTaintPolicies().Informer(), clustertaint.NewFleetGuard(0.55, 0.5, 0.1),
		clustertaint.Options{GuardPeriod: 200 * time.Millisecond, Recorder: recorder,
			GuardPublisher: clustertaint.NewGuardPublisher(kubernetes.NewForConfigOrDie(hubCfg), "flotilla-system")})
	runCtx, cancel := context.WithCancel(ctx)
	factory.Start(runCtx.Done())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); ctl.Run(runCtx, 1) }()
	go func() {
		for range recorder.Events {
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait(); factory.Shutdown() })

	published := func(want func(clustertaint.PublishedGuard) bool) *corev1.ConfigMap {
		t.Helper()
		var cm *corev1.ConfigMap
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
			got, err := env.Kube.CoreV1().ConfigMaps("flotilla-system").Get(ctx, clustertaint.GuardConfigMapName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			g, err := clustertaint.ParseGuardConfigMap(got.Data)
			if err != nil {
				return false, err
			}
			cm = got
			return want(g), nil
		})
		if err != nil {
			t.Fatalf("waiting for the guard ConfigMap: %v; last %+v", err, cm)
		}
		return cm
	}

	cm := published(func(g clustertaint.PublishedGuard) bool {
		return g.Mode == clustertaint.GuardNormal && g.Total == 3 && g.NotReady == 0 &&
			g.Regions["eu"].Total == 2 && g.Regions["us"].Mode == clustertaint.GuardNormal && !g.Since.IsZero()
	})

	// A steady verdict is not rewritten: after many evaluations (every
	// 200ms) the object is the one written first.
	steady := cm.ResourceVersion
	waitPublishTest(t, "a dozen guard evaluations", func() bool {
		got, err := env.Kube.CoreV1().ConfigMaps("flotilla-system").Get(ctx, clustertaint.GuardConfigMapName, metav1.GetOptions{})
		if err != nil || got.ResourceVersion != steady {
			t.Fatalf("steady verdict rewritten: %v %+v", err, got)
		}
		return time.Since(cm.CreationTimestamp.Time) > 3*time.Second
	})

	// Every cluster not Ready: FullDisruption, published.
	for _, name := range []string{"m1", "m2", "m3"} {
		c, err := admin.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		publishTestSetReady(t, admin, c, metav1.ConditionFalse)
	}
	published(func(g clustertaint.PublishedGuard) bool {
		return g.Mode == clustertaint.GuardFullDisruption && g.NotReady == 3 && g.Regions["eu"].NotReady == 2
	})

	// Deleted, it comes back at the next evaluation.
	if err := env.Kube.CoreV1().ConfigMaps("flotilla-system").Delete(ctx, clustertaint.GuardConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	published(func(g clustertaint.PublishedGuard) bool { return g.Mode == clustertaint.GuardFullDisruption })
}

func waitPublishTest(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func publishTestSetReady(t *testing.T, fc flotillaclient.Interface, c *clusterv1alpha1.Cluster, status metav1.ConditionStatus) {
	t.Helper()
	waitPublishTest(t, "cluster "+c.Name+" Ready="+string(status), func() bool {
		cur, err := fc.ClusterV1alpha1().Clusters().Get(context.Background(), c.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady,
			Status: status, Reason: "SetByTest", Message: "set by the test"})
		_, err = fc.ClusterV1alpha1().Clusters().UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err == nil
	})
}
