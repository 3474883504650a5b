package app_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-io/flotilla/hub/app"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
	"github.com/flotilla-io/flotilla/pkg/testenv"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// untrustedSeedEnv replays TestUntrustedWorkStatusNeverFreezesABinding
// with a given seed.
const untrustedSeedEnv = "FLOTILLA_UNTRUSTED_STATUS_SEED"

// Issue 30 items 1 and 2: what a member's agent writes into its Works is
// untrusted input. Eight lying members write random Work statuses of the
// workload "web" — condition messages up to 32,768 characters of control
// characters, invalid UTF-8, bidi overrides and emoji, up to 12
// conditions, up to 70 manifest statuses of up to 1.4 MB and 200 fields,
// healths the API does not know — round after round, then one last report
// each that the Work CRD admits: Applied=False with a 4,096-character
// message and a 15 KiB status. Meanwhile member10 turns Unhealthy for "web"
// and for "api"; member9 is healthy.
//
// The hub must keep every binding and template status write succeeding (the
// apiserver's audit log shows none refused), show each liar's last report
// in the binding and the template (bounded, nothing frozen), and fail both
// workloads over from member10. The seed is printed; set
// FLOTILLA_UNTRUSTED_STATUS_SEED to replay one.
func TestUntrustedWorkStatusNeverFreezesABinding(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(untrustedSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", untrustedSeedEnv, s, err)
		}
		seed = v
	}
	t.Logf("seed %d", seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with %s=%d", untrustedSeedEnv, seed)
		}
	})
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))

	env := testenv.Start(t, testenv.WithAuditLog())
	ctx, cancel := context.WithCancel(context.Background())
	opts := app.NewOptions()
	opts.Kubeconfig = env.KubeconfigFor(t, env.Config)
	opts.LeaderElection.LeaderElect = false
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	opts.BindingStatusHold = time.Second
	opts.ClusterStartupGracePeriod, opts.ClusterMonitorGracePeriod = time.Hour, time.Hour // no agent renews the Leases
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, opts) }()
	t.Cleanup(func() { cancel(); <-done })
	fc := flotillaclient.NewForConfigOrDie(env.Config)
	statusWrites := []string{"resourcebindings/status", "resourcetemplates/status", "resourcebindings", "resourcetemplates"}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// Why: the writes the apiserver refused (first few).
		for i, f := range env.FailedWrites(t, statusWrites...) {
			if i == 5 {
				break
			}
			t.Logf("refused: %.300s", f)
		}
	})

	liars := []string{"member1", "member2", "member3", "member4", "member5", "member6", "member7", "member8"}
	const healthy, victim = "member9", "member10"
	all := append(slices.Clone(liars), healthy, victim)
	createReadyClusters(t, ctx, fc, all...)

	ns := "default"
	toleration := int32(2)
	failover := &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{
		PurgeMode: policyv1alpha1.PurgeModeGracefully, DecisionConditions: policyv1alpha1.DecisionConditions{TolerationSeconds: &toleration}}}
	workloads := map[string]string{"web": "web-deployment", "api": "api-deployment"}
	for name := range workloads {
		manifest := strings.ReplaceAll(nginxManifest, "nginx", name)
		if _, err := fc.PolicyV1alpha1().PropagationPolicies(ns).Create(ctx, fgPolicy(ns, name, "Deployment", all, failover), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := fc.WorkV1alpha1().ResourceTemplates(ns).Create(ctx, rtOf(ns, name, manifest), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, binding := range workloads {
		fgWaitPlaced(t, fc, ns, binding, all...)
		for _, c := range all {
			if c != victim && (binding == "api-deployment" || !slices.Contains(liars, c)) {
				fgReportHealth(t, fc, c, ns, binding, workv1alpha1.ResourceHealthy)
			}
		}
	}

	// The liars' rounds; member10 turns Unhealthy after the first.
	const web = "web-deployment"
	admitted, refused := 0, 0
	for round := range 3 {
		for _, c := range liars {
			status := randomWorkStatus(rng)
			if untrustedWrite(t, fc, c, ns, web, status) {
				admitted++
			} else {
				refused++
			}
		}
		if round == 0 {
			for _, binding := range workloads {
				fgReportHealth(t, fc, victim, ns, binding, workv1alpha1.ResourceUnhealthy)
			}
		}
	}
	t.Logf("random reports: %d admitted, %d refused by the Work CRD or the apiserver", admitted, refused)

	// Each liar's last report, one the Work CRD admits.
	final := map[string]string{}
	for _, c := range liars {
		msg := "final " + c + " " + randomText(rng, statuslimits.MaxConditionMessage-len("final member1 "))
		status := workv1alpha1.WorkStatus{
			Conditions: []metav1.Condition{{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionFalse,
				Reason: "ApplyFailed", Message: msg}},
			ManifestStatuses: []workv1alpha1.ManifestStatus{{
				Identifier: workv1alpha1.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "web"},
				Status:     randomStatus(rng, 15<<10, 20), Health: workv1alpha1.ResourceUnknown}},
		}
		if !untrustedWrite(t, fc, c, ns, web, status) {
			t.Fatalf("%s: the Work CRD refused a report within its bounds", c)
		}
		// What the apiserver stored: JSON has no invalid UTF-8.
		w, err := fc.WorkV1alpha1().Works("flotilla-es-"+c).Get(ctx, workobjects.WorkName(ns, web), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		final[c] = statuslimits.Text(meta.FindStatusCondition(w.Status.Conditions, workv1alpha1.WorkConditionApplied).Message, statuslimits.MaxClusterMessage)
	}

	// Nothing froze: the binding and the template show every liar's last
	// report, bounded.
	waitUntil(t, "web's binding and template show every liar's last report", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, web, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		tmpl, err := fc.WorkV1alpha1().ResourceTemplates(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, items := range [][]workv1alpha1.AggregatedStatusItem{rb.Status.AggregatedStatus, tmpl.Status.AggregatedStatus} {
			for _, c := range liars {
				i := slices.IndexFunc(items, func(it workv1alpha1.AggregatedStatusItem) bool { return it.ClusterName == c })
				if i < 0 || items[i].AppliedMessage != final[c] {
					return false, nil
				}
			}
		}
		applied := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha1.BindingConditionFullyApplied)
		mirrored := meta.FindStatusCondition(tmpl.Status.Conditions, workv1alpha1.BindingConditionFullyApplied)
		return applied != nil && mirrored != nil && applied.Status == metav1.ConditionFalse && mirrored.Message == applied.Message &&
			strings.Contains(applied.Message, "more clusters") && len([]rune(applied.Message)) <= statuslimits.MaxSummary, nil
	})

	// An applied copy whose status is larger than the hub keeps: the
	// binding shows a stand-in that says so, not nothing.
	applied := workv1alpha1.WorkStatus{
		Conditions: []metav1.Condition{{Type: workv1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue, Reason: "Applied"}},
		ManifestStatuses: []workv1alpha1.ManifestStatus{{
			Identifier: workv1alpha1.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "web"},
			Status:     randomStatus(rng, 200<<10, 20), Health: workv1alpha1.ResourceUnknown}},
	}
	if !untrustedWrite(t, fc, liars[0], ns, web, applied) {
		t.Fatalf("%s: the Work CRD refused a 200 KiB status", liars[0])
	}
	waitUntil(t, "web's binding names the status it left out", func() (bool, error) {
		rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, web, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		i := slices.IndexFunc(rb.Status.AggregatedStatus, func(it workv1alpha1.AggregatedStatusItem) bool { return it.ClusterName == liars[0] })
		return i >= 0 && rb.Status.AggregatedStatus[i].Applied && rb.Status.AggregatedStatus[i].Status != nil &&
			strings.Contains(string(rb.Status.AggregatedStatus[i].Status.Raw), `"`+statuslimits.LeftOutField+`":"reported status left out: `), nil
	})

	// member10 fails over, for web as for api.
	for _, binding := range workloads {
		waitUntil(t, binding+" evicted from "+victim, func() (bool, error) {
			rb, err := fc.WorkV1alpha1().ResourceBindings(ns).Get(ctx, binding, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return !slices.Contains(fgPlaced(rb), victim) && slices.ContainsFunc(rb.Spec.EvictionHistory, func(h workv1alpha1.EvictionHistoryEntry) bool {
				return h.ClusterName == victim && h.Reason == workv1alpha1.EvictionReasonApplicationFailure
			}), nil
		})
	}

	if failed := env.FailedWrites(t, statusWrites...); len(failed) > 0 {
		t.Errorf("%d binding or template writes refused, e.g. %.400s", len(failed), failed[0])
	}
}

// untrustedWrite writes status into cluster's Work of binding as its agent
// would, and reports whether the apiserver took it.
func untrustedWrite(t *testing.T, fc flotillaclient.Interface, cluster, ns, binding string, status workv1alpha1.WorkStatus) bool {
	t.Helper()
	var took bool
	waitUntil(t, cluster+"'s report written or refused", func() (bool, error) {
		cur, err := fc.WorkV1alpha1().Works("flotilla-es-"+cluster).Get(context.Background(), workobjects.WorkName(ns, binding), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		cur.Status = *status.DeepCopy()
		for i := range cur.Status.Conditions {
			c := &cur.Status.Conditions[i]
			c.ObservedGeneration, c.LastTransitionTime = cur.Generation, metav1.Now()
		}
		_, err = fc.WorkV1alpha1().Works(cur.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		switch {
		case err == nil:
			took = true
			return true, nil
		case strings.Contains(err.Error(), "the object has been modified"):
			return false, nil
		default:
			return true, nil // refused: invalid, too large
		}
	})
	return took
}

// randomWorkStatus is what a lying (or merely verbose) agent might write:
// most reports within what the Work CRD admits (which still includes
// statuses far larger than the hub copies: the CRD cannot count bytes),
// the others past some bound.
func randomWorkStatus(rng *rand.Rand) workv1alpha1.WorkStatus {
	hostile := rng.IntN(3) == 0
	pick := func(admissible, beyond []int) int {
		if hostile && rng.IntN(3) == 0 {
			return beyond[rng.IntN(len(beyond))]
		}
		return admissible[rng.IntN(len(admissible))]
	}
	var s workv1alpha1.WorkStatus
	types := []string{workv1alpha1.WorkConditionApplied, workv1alpha1.WorkConditionAvailable, workv1alpha1.WorkConditionDispatching}
	for i := range pick([]int{1, 2, 3, 8}, []int{9, 12}) {
		typ := "Custom" + strconv.Itoa(i)
		if i < len(types) {
			typ = types[i]
		}
		status := []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}[rng.IntN(3)]
		s.Conditions = append(s.Conditions, metav1.Condition{Type: typ, Status: status, Reason: "Lying",
			Message: randomText(rng, pick([]int{0, 12, 1000, 4096}, []int{4097, 32768}))})
	}
	for i := range pick([]int{0, 1, 1, 2, 64}, []int{65, 70}) {
		health := []workv1alpha1.ResourceHealth{"", workv1alpha1.ResourceHealthy, workv1alpha1.ResourceUnknown}[rng.IntN(3)]
		if hostile && rng.IntN(4) == 0 {
			health = "Splendid"
		}
		size := pick([]int{100, 15 << 10, 20 << 10, 300 << 10, 1200 << 10}, []int{1400 << 10, 2 << 20})
		if i > 0 {
			size = rng.IntN(12 << 10) // many statuses: keep the Work storable, mostly
		}
		s.ManifestStatuses = append(s.ManifestStatuses, workv1alpha1.ManifestStatus{
			Identifier: workv1alpha1.ResourceIdentifier{Ordinal: int32(i), Group: "apps", Version: "v1", Kind: "Deployment",
				Namespace: "default", Name: randomText(rng, pick([]int{5, 60, 253}, []int{254, 300}))},
			Status: randomStatus(rng, size, pick([]int{1, 5, 128}, []int{129, 200})),
			Health: health,
		})
	}
	return s
}

// randomText is n characters of what a terminal or a JSON field may choke
// on: control characters, escape sequences, invalid UTF-8 bytes, bidi
// overrides, emoji, and plain text.
func randomText(rng *rand.Rand, n int) string {
	pieces := []string{"a", "Z", " ", "\t", "\n", "\r", "\x1b[2J", "\x1b]52;c;aGk=\x07", "\x00", "\x7f", "\u0085", "\u009b",
		"\u202e", "\u2066", "é", "🚀", "\xff", "\xc3", "member1: ", "; ", "…"}
	var b strings.Builder
	// Characters as the apiserver counts them: JSON turns each invalid
	// byte into one U+FFFD.
	for count := 0; ; {
		p := pieces[rng.IntN(len(pieces))]
		c := 0
		for i := 0; i < len(p); c++ {
			_, size := utf8.DecodeRuneInString(p[i:])
			i += size
		}
		if count+c > n {
			return b.String()
		}
		b.WriteString(p)
		count += c
	}
}

// randomStatus is a JSON object of about size bytes in fields top-level
// fields, with replica counts among them.
func randomStatus(rng *rand.Rand, size, fields int) *runtime.RawExtension {
	m := map[string]any{"replicas": rng.IntN(5), "availableReplicas": rng.IntN(5)}
	per := max(1, size/max(1, fields))
	for i := range fields {
		m["f"+strconv.Itoa(i)] = strings.Repeat(string(rune('a'+rng.IntN(26))), per)
	}
	raw, _ := json.Marshal(m)
	return &runtime.RawExtension{Raw: raw}
}
