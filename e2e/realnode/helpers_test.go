package realnode

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// createNamespace makes ns on a cluster and removes it after the spec.
func createNamespace(ctx context.Context, kube kubernetes.Interface, ns string) {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	DeferCleanup(func(ctx context.Context) { _ = kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
}

// pods lists the pods of a Deployment-like selector in ns.
func pods(ctx context.Context, g Gomega, kube kubernetes.Interface, ns, selector string) []corev1.Pod {
	list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	g.Expect(err).NotTo(HaveOccurred())
	return list.Items
}

// readyPods counts the Running, Ready, not deleting pods.
func readyPods(list []corev1.Pod) int {
	n := 0
	for _, p := range list {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// metric reads one sample of a pod's /metrics on port 8080 (the hub's and
// the agent's metrics port in the manifests); the host reaches pod IPs
// through the route hack/realnode-up.sh adds. ok is false when the pod
// does not answer or has no such series.
func metric(ctx context.Context, pod corev1.Pod, name string) (float64, bool) {
	if pod.Status.PodIP == "" {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pod.Status.PodIP+":8080/metrics", nil)
	if err != nil {
		return 0, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, found := strings.CutPrefix(line, name+" "); found {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// leader returns the one pod (by selector in ns) whose gauge is 1, and
// fails when none or more than one leads.
func leader(ctx context.Context, g Gomega, kube kubernetes.Interface, ns, selector, gauge string) corev1.Pod {
	var leaders []corev1.Pod
	for _, p := range pods(ctx, g, kube, ns, selector) {
		if p.DeletionTimestamp != nil {
			continue
		}
		if v, ok := metric(ctx, p, gauge); ok && v == 1 {
			leaders = append(leaders, p)
		}
	}
	g.Expect(leaders).To(HaveLen(1), "exactly one pod with %s 1", gauge)
	return leaders[0]
}

// kubectlFlotilla runs the plugin (bin/kubectl-flotilla) against the hub.
func kubectlFlotilla(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(root, "bin", "kubectl-flotilla"),
		append([]string{"--kubeconfig", kubeconfig, "--context", hubContext}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// tokenExpiry is the exp claim of a JWT.
func tokenExpiry(token string) (time.Time, error) {
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return time.Time{}, fmt.Errorf("not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, err
	}
	var claims struct {
		Exp int64  `json:"exp"`
		Sub string `json:"sub"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return time.Time{}, err
	}
	return time.Unix(claims.Exp, 0), nil
}
