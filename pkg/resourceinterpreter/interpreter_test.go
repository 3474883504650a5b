package resourceinterpreter

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func obj(apiVersion, kind string, generation int64, spec, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": "x", "generation": generation}}}
	if spec != nil {
		u.Object["spec"] = spec
	}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func TestHealth(t *testing.T) {
	const healthy, unhealthy = workv1alpha1.ResourceHealthy, workv1alpha1.ResourceUnhealthy
	deploy := func(gen, observed, updated, available, replicas int64) *unstructured.Unstructured {
		return obj("apps/v1", "Deployment", gen, map[string]any{"replicas": int64(3)},
			map[string]any{"observedGeneration": observed, "updatedReplicas": updated, "availableReplicas": available, "replicas": replicas})
	}
	cases := []struct {
		name string
		obj  *unstructured.Unstructured
		want workv1alpha1.ResourceHealth
	}{
		{"deployment all available", deploy(2, 2, 3, 3, 3), healthy},
		// The Karmada #7455 trap: 3/3 available, but for the previous spec.
		{"deployment status of an older generation", deploy(3, 2, 3, 3, 3), unhealthy},
		{"deployment rolling", deploy(2, 2, 2, 3, 4), unhealthy},
		{"deployment short of replicas", deploy(1, 1, 3, 2, 3), unhealthy},
		{"statefulset ready", obj("apps/v1", "StatefulSet", 1, map[string]any{"replicas": int64(2)},
			map[string]any{"observedGeneration": int64(1), "updatedReplicas": int64(2), "readyReplicas": int64(2), "replicas": int64(2)}), healthy},
		{"replicaset default replicas", obj("apps/v1", "ReplicaSet", 1, map[string]any{},
			map[string]any{"observedGeneration": int64(1), "availableReplicas": int64(1)}), healthy},
		{"daemonset partly updated", obj("apps/v1", "DaemonSet", 1, nil,
			map[string]any{"observedGeneration": int64(1), "desiredNumberScheduled": int64(3), "updatedNumberScheduled": int64(2), "numberAvailable": int64(3)}), unhealthy},
		{"job failed", obj("batch/v1", "Job", 1, nil, map[string]any{"conditions": []any{map[string]any{"type": "Failed", "status": "True"}}}), unhealthy},
		{"job running", obj("batch/v1", "Job", 1, nil, map[string]any{"active": int64(1)}), healthy},
		{"pod running ready", obj("v1", "Pod", 0, nil, map[string]any{"phase": "Running", "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}), healthy},
		{"pod pending", obj("v1", "Pod", 0, nil, map[string]any{"phase": "Pending"}), unhealthy},
		{"clusterip service", obj("v1", "Service", 0, map[string]any{"type": "ClusterIP"}, nil), healthy},
		{"load balancer without address", obj("v1", "Service", 0, map[string]any{"type": "LoadBalancer"}, nil), unhealthy},
		{"ingress with address", obj("networking.k8s.io/v1", "Ingress", 1, nil,
			map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "1.2.3.4"}}}}), healthy},
		{"pvc pending", obj("v1", "PersistentVolumeClaim", 0, nil, map[string]any{"phase": "Pending"}), unhealthy},
		{"pdb satisfied", obj("policy/v1", "PodDisruptionBudget", 1, nil,
			map[string]any{"observedGeneration": int64(1), "currentHealthy": int64(2), "desiredHealthy": int64(2)}), healthy},
		{"configmap", obj("v1", "ConfigMap", 0, nil, nil), healthy},
	}
	for _, tc := range cases {
		if got := Health(tc.obj); got != tc.want {
			t.Errorf("%s: Health = %s, want %s", tc.name, got, tc.want)
		}
	}
	if Health(nil) != workv1alpha1.ResourceUnknown {
		t.Error("Health(nil) should be Unknown")
	}
}

func TestReflectStatus(t *testing.T) {
	d := obj("apps/v1", "Deployment", 4, nil, map[string]any{"observedGeneration": int64(4), "availableReplicas": int64(3),
		"conditions": []any{map[string]any{"type": "Available"}}})
	var got map[string]any
	if err := json.Unmarshal(ReflectStatus(d).Raw, &got); err != nil {
		t.Fatal(err)
	}
	if got["availableReplicas"] != float64(3) || got["generation"] != float64(4) || got["conditions"] != nil {
		t.Errorf("Deployment status reflected as %v; want replica counts and generation, no conditions", got)
	}
	if ReflectStatus(obj("v1", "ConfigMap", 0, nil, nil)) != nil {
		t.Error("an object without status reflects nothing")
	}
	big := map[string]any{"blob": string(make([]byte, maxReflectedStatus))}
	if ReflectStatus(obj("example.com/v1", "Gadget", 1, nil, big)) != nil {
		t.Error("an oversized unknown status must not travel to the hub")
	}
	// A custom resource's whole status travels, nested fields included:
	// stateful failover reads status.jobStatus.checkpointPath of a Flink job.
	flink := obj("flink.example.io/v1beta1", "FlinkDeployment", 2, nil, map[string]any{
		"jobStatus": map[string]any{"checkpointPath": "ckpt-0042", "state": "RUNNING"}, "lifecycleState": "STABLE"})
	got = nil
	if err := json.Unmarshal(ReflectStatus(flink).Raw, &got); err != nil {
		t.Fatal(err)
	}
	if js, _ := got["jobStatus"].(map[string]any); js["checkpointPath"] != "ckpt-0042" || got["lifecycleState"] != "STABLE" {
		t.Errorf("FlinkDeployment status reflected as %v; want all of it", got)
	}
	// Too large because of one field: that field is left out, the
	// checkpoint path still travels.
	flink.Object["status"].(map[string]any)["reconciliationStatus"] = map[string]any{"lastReconciledSpec": string(make([]byte, maxReflectedStatus))}
	raw := ReflectStatus(flink)
	if raw == nil || len(raw.Raw) > maxReflectedStatus {
		t.Fatalf("oversized FlinkDeployment status reflected as %v; want it without its largest field", raw)
	}
	got = nil
	if err := json.Unmarshal(raw.Raw, &got); err != nil {
		t.Fatal(err)
	}
	if js, _ := got["jobStatus"].(map[string]any); js["checkpointPath"] != "ckpt-0042" || got["reconciliationStatus"] != nil {
		t.Errorf("oversized FlinkDeployment status reflected as %v; want jobStatus without reconciliationStatus", got)
	}
}
