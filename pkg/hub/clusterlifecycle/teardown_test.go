package clusterlifecycle

import (
	"testing"
	"time"
)

func TestPlanTeardown(t *testing.T) {
	const timeout = 5 * time.Minute
	for _, tc := range []struct {
		name string
		s    teardownState
		want teardownStep
	}{
		{"a Ready cluster's Works are deleted and its agent is waited for; nothing else goes yet",
			teardownState{Ready: true, Timeout: timeout, Works: 3, Held: 3, Undeleted: 3, NamespaceExists: true},
			teardownStep{DeleteWorks: true, RequeueAfter: teardownPoll}},
		{"while the agent releases them, nothing is deleted again",
			teardownState{Ready: true, Elapsed: time.Minute, Timeout: timeout, Works: 2, Held: 2, NamespaceExists: true},
			teardownStep{RequeueAfter: teardownPoll}},
		{"the wait ends at the timeout",
			teardownState{Ready: true, Elapsed: timeout - time.Second, Timeout: timeout, Works: 2, Held: 2, NamespaceExists: true},
			teardownStep{RequeueAfter: time.Second}},
		{"an agent that did not release within the timeout has its Works released by the hub",
			teardownState{Ready: true, Elapsed: timeout, Timeout: timeout, Works: 2, Held: 2, NamespaceExists: true},
			teardownStep{Abandon: true, AbandonReason: "its agent did not release them within 5m0s", RequeueAfter: teardownPoll}},
		{"a cluster that is not Ready cannot release: at once",
			teardownState{Timeout: timeout, Works: 2, Held: 2, Undeleted: 2, NamespaceExists: true},
			teardownStep{DeleteWorks: true, Abandon: true, AbandonReason: "the cluster is not Ready, so its agent cannot release them", RequeueAfter: teardownPoll}},
		{"a cluster that stops being Ready while releasing: the rest at once",
			teardownState{Elapsed: time.Minute, Timeout: timeout, Works: 1, Held: 1, NamespaceExists: true},
			teardownStep{Abandon: true, AbandonReason: "the cluster is not Ready, so its agent cannot release them", RequeueAfter: teardownPoll}},
		{"Works without finalizers are only deleted",
			teardownState{Timeout: timeout, Works: 1, Undeleted: 1, NamespaceExists: true},
			teardownStep{DeleteWorks: true, RequeueAfter: teardownPoll}},
		{"no Works left: the namespace goes, with the agent's ServiceAccount",
			teardownState{Ready: true, Timeout: timeout, NamespaceExists: true},
			teardownStep{DeleteNamespace: true, RequeueAfter: teardownPoll}},
		{"the namespace is being emptied: wait",
			teardownState{Ready: true, Timeout: timeout, NamespaceExists: true, NamespaceTerminating: true},
			teardownStep{RequeueAfter: teardownPoll}},
		{"a Work made while the namespace terminates is handled like any other",
			teardownState{Timeout: timeout, Works: 1, Held: 1, NamespaceExists: true, NamespaceTerminating: true},
			teardownStep{Abandon: true, AbandonReason: "the cluster is not Ready, so its agent cannot release them", RequeueAfter: teardownPoll}},
		{"the namespace is gone: the identity goes last, then the finalizer",
			teardownState{Ready: true, Timeout: timeout},
			teardownStep{Finish: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := planTeardown(tc.s); got != tc.want {
				t.Errorf("planTeardown(%+v)\n got %+v\nwant %+v", tc.s, got, tc.want)
			}
		})
	}
}
