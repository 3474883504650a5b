package leader

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

const us = "agent-a"

// fakeLock is a resourcelock.Interface whose writes return err.
type fakeLock struct{ err error }

func (f *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return nil, nil, errors.New("not used")
}
func (f *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return f.err }
func (f *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return f.err }
func (f *fakeLock) RecordEvent(string)                                              {}
func (f *fakeLock) Identity() string                                                { return us }
func (f *fakeLock) Describe() string                                                { return "fake" }

func TestTolerantLock(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "flotilla-agent", errors.New("modified"))
	serverError := apierrors.NewInternalError(errors.New("etcd"))

	type step struct {
		create  bool   // Create, else Update
		holder  string // HolderIdentity of the record written
		err     error  // what the apiserver answers
		swallow bool   // the lock returns nil although err is set
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"before holding, unreachable is an error", []step{
			{holder: us, err: refused},
		}},
		{"after creating the Lease, unreachable and timeouts are renewals", []step{
			{create: true, holder: us},
			{holder: us, err: refused, swallow: true},
			{holder: us, err: refused, swallow: true},
			{holder: us, err: context.DeadlineExceeded, swallow: true},
			{holder: us}, // reachable again
			{holder: us, err: refused, swallow: true},
		}},
		{"a conflict ends the tolerance", []step{
			{holder: us}, // took the Lease over with an update
			{holder: us, err: refused, swallow: true},
			{holder: us, err: conflict},
			{holder: us, err: refused}, // no longer known to hold it
		}},
		{"a server error ends the tolerance", []step{
			{create: true, holder: us},
			{holder: us, err: serverError},
			{holder: us, err: refused},
		}},
		{"a failed create holds nothing", []step{
			{create: true, holder: us, err: refused},
			{holder: us, err: refused},
		}},
		{"a record of another holder is never faked", []step{
			{holder: us},
			{holder: "agent-b", err: refused},
		}},
		{"releasing the Lease ends holding", []step{
			{holder: us},
			{holder: ""}, // ReleaseOnCancel writes an empty holder
			{holder: us, err: refused},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inner := &fakeLock{}
			lock := &tolerantLock{Interface: inner, logger: logr.Discard()}
			for i, s := range tc.steps {
				inner.err = s.err
				ler := resourcelock.LeaderElectionRecord{HolderIdentity: s.holder}
				var err error
				if s.create {
					err = lock.Create(context.Background(), ler)
				} else {
					err = lock.Update(context.Background(), ler)
				}
				want := s.err
				if s.swallow {
					want = nil
				}
				if !errors.Is(err, want) || (want == nil) != (err == nil) {
					t.Fatalf("step %d: got %v, want %v", i, err, want)
				}
			}
		})
	}
}
