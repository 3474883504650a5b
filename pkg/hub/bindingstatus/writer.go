// Package bindingstatus writes a binding's status for the controllers that
// share it (the scheduler's Scheduled condition, the binding controller's
// aggregated status), coalescing a new binding's first status into one
// write.
//
// A new binding used to get a status write per step of the pipeline:
// "no cluster yet" from the binding controller, then Scheduled from the
// scheduler, then "Works made, waiting for the agents", then each agent's
// report (docs/benchmarks.md, issue 20). Only the last one is what the
// binding settles on. Here each controller submits its part of the status
// with how far the binding has come (Stage); the parts of a binding that
// has never shown a status are held in memory until one of them settles or
// the hold runs out, then written together. A binding that already shows
// a status gets every change written at once: failover, graceful eviction
// and the failover history read those statuses and must not wait.
//
// Holding is safe across restarts: nothing is lost but the wait. A new
// hub's scheduler and binding controller compute the same parts again from
// the binding, its Works and the clusters.
package bindingstatus

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/cachetransform"
	"github.com/flotilla-io/flotilla/pkg/hub/forbidden"
	"github.com/flotilla-io/flotilla/pkg/queueworker"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

// DefaultHold is how long a new binding's status may wait for its agents
// (see Stage) before it is written as it stands.
const DefaultHold = 30 * time.Second

// maxHoldFactor bounds the wait for the hub's own stages: a part stuck
// there (a controller failing and retrying) is written after this many
// holds (4 min by default).
const maxHoldFactor = 8

// MaxBehindFactor bounds, in holds, the wait of a binding whose latest
// change the binding controller has not synced yet (it is still in that
// controller's queue): the hub is behind, not failing (a sync that fails
// ends the wait, see Summed), and the binding's status is written as soon
// as the sync comes. 32 holds (16 min by default) only guard against a
// sync that never comes.
const MaxBehindFactor = 32

// Stage says how far the binding has come, as the part's author sees it.
type Stage int

const (
	// Settled: the part is what the binding settles on (fully applied,
	// unschedulable, an error the user must see): written at once, with
	// every other part held for the binding.
	Settled Stage = iota
	// HubStage: the binding waits for another hub controller (the binding
	// controller has not made the Works of the new placement yet). The hub
	// completes these steps by itself, so they have no time bound but
	// maxHoldFactor holds.
	HubStage
	// AgentStage: every Work is made and the binding waits for agents to
	// report. Agents can stall for reasons outside the hub: the hold runs
	// from the first such part.
	AgentStage
)

// Part sets its author's fields of a binding status.
type Part func(*workv1alpha1.ResourceBindingStatus)

// Writer writes binding statuses; one is shared by the controllers of a
// hub.
type Writer struct {
	bindings *workobjects.Bindings
	hold     time.Duration
	clock    clock.Clock
	queue    workqueue.TypedRateLimitingInterface[string]

	mu      sync.Mutex
	pending map[string]*held
	// changes counts Changed calls and hub-stage first parts: the order of
	// changes and syncs (held.changed, held.synced).
	changes uint64
	// written keeps the binding each successful write returned until the
	// informer delivers it, so a controller that syncs in between reads
	// its own write, not the status before it.
	written map[string]*workv1alpha1.ResourceBinding

	// recorder and denials: a write the apiserver refuses for want of a
	// permission is a Warning event on the binding and a denial the
	// detector shows on the template (the binding's own status is what
	// cannot be written). Both optional.
	recorder record.EventRecorder
	denials  *forbidden.Denials
}

type held struct {
	uid   types.UID
	parts map[string]Part
	// seq counts submissions: a write clears only the parts it carried.
	seq      map[string]int
	next     int
	first    time.Time // first held part
	agentsAt time.Time // first AgentStage part; zero while none
	// changed is the writer's change count (Writer.changes) at the last
	// change of the binding or its Works that its syncing controller was
	// told of while parts were held (Changed), or at the first part if it
	// was in the hub's stages (that controller has the placement to turn
	// into Works); synced is the count its last finished sync started from
	// (Summed). While changed > synced the binding waits in the hub's
	// queue, not for agents or a failing controller (hubBehind).
	changed, synced uint64
	// retry: a write of these parts failed; the writer's queue writes them
	// with backoff, hold or not (their authors see them in View and do not
	// submit them again).
	retry bool
}

// NewWriter returns a Writer that writes through client and reads
// factory's binding informers. hold 0 writes every part at once.
func NewWriter(client flotillaclient.Interface, factory flotillainformers.SharedInformerFactory, hold time.Duration, clk clock.Clock) *Writer {
	if clk == nil {
		clk = clock.RealClock{}
	}
	bindings, informers := workobjects.NewBindings(client, factory)
	w := &Writer{bindings: bindings, hold: hold, clock: clk,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "binding-status"}),
		pending: map[string]*held{}, written: map[string]*workv1alpha1.ResourceBinding{}}
	seen := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		m, ok := obj.(interface {
			GetResourceVersion() string
			GetNamespace() string
			GetName() string
		})
		if !ok {
			return
		}
		key := cache.NewObjectName(m.GetNamespace(), m.GetName()).String()
		w.mu.Lock()
		if b := w.written[key]; b != nil && b.ResourceVersion == m.GetResourceVersion() {
			delete(w.written, key)
		}
		w.mu.Unlock()
	}
	gone := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if m, ok := obj.(interface {
			GetNamespace() string
			GetName() string
		}); ok {
			key := cache.NewObjectName(m.GetNamespace(), m.GetName()).String()
			w.mu.Lock()
			delete(w.written, key)
			delete(w.pending, key)
			w.mu.Unlock()
			w.denials.Allowed(key)
		}
	}
	for _, inf := range informers {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, n any) { seen(n) }, DeleteFunc: gone})
	}
	return w
}

// WithRecorder records a Warning event (forbidden.EventReason) on a
// binding whose status write the apiserver refused for want of a
// permission.
func (w *Writer) WithRecorder(r record.EventRecorder) *Writer {
	w.recorder = r
	return w
}

// WithDenials records in d, under the binding's key, a status write the
// apiserver refused for want of a permission, until one succeeds.
func (w *Writer) WithDenials(d *forbidden.Denials) *Writer {
	w.denials = d
	return w
}

// Run writes the parts whose hold ends until ctx is done.
func (w *Writer) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	defer w.queue.ShutDown()
	queueworker.Run(ctx, "binding-status", w.queue, 1, w.flushDue)
}

// View returns the binding as its controllers should read it: the latest of
// the cache and this writer's last write, with every held part applied.
// stored is the binding from the cache; it is returned as is when nothing
// differs.
func (w *Writer) View(stored *workv1alpha1.ResourceBinding) *workv1alpha1.ResourceBinding {
	if stored == nil {
		return nil
	}
	key := workobjects.Key(stored)
	w.mu.Lock()
	defer w.mu.Unlock()
	base := w.latest(key, stored)
	h := w.pending[key]
	if h == nil || h.uid != stored.UID {
		return base
	}
	out := base.DeepCopy()
	for _, author := range authors(h) {
		h.parts[author](&out.Status)
	}
	return out
}

// latest returns written[key] when it is newer than stored: a write the
// informer has not delivered yet. Otherwise it forgets written[key] (the
// informer's event may have come before the write returned) and returns
// stored. Callers hold mu.
func (w *Writer) latest(key string, stored *workv1alpha1.ResourceBinding) *workv1alpha1.ResourceBinding {
	b := w.written[key]
	if b == nil {
		return stored
	}
	if b.UID == stored.UID && newer(b.ResourceVersion, stored.ResourceVersion) {
		return b
	}
	delete(w.written, key)
	return stored
}

// newer reports whether resource version a is after b. Resource versions
// are opaque to clients in general; the apiserver's etcd3 storage makes
// them increasing integers, and anything else counts as not newer: the
// cache is used and a stale write only costs a conflict and a retry.
func newer(a, b string) bool {
	ai, errA := strconv.ParseUint(a, 10, 64)
	bi, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && ai > bi
}

// Write submits author's part of the status of binding (read from the
// cache) at stage. It writes now, together with every part held for the
// binding, unless the binding has never shown a status it may hold (see
// the package comment); a held part is written with the next part that
// settles, or when its hold ends. A later part of the same author replaces
// its earlier one. An error means nothing was written; the part stays
// submitted and the caller retries as usual.
func (w *Writer) Write(ctx context.Context, binding *workv1alpha1.ResourceBinding, author string, part Part, stage Stage) error {
	key := workobjects.Key(binding)
	now := w.clock.Now()
	// binding may be a View: what is stored comes from the cache (or our
	// last write), never from the caller's copy.
	stored, err := w.bindings.Get(key)
	if apierrors.IsNotFound(err) || err == nil && stored.UID != binding.UID {
		return nil // deleted (or replaced): nothing to write to
	}
	if err != nil {
		return err
	}
	w.mu.Lock()
	h := w.pending[key]
	if h == nil || h.uid != binding.UID {
		h = &held{uid: binding.UID, parts: map[string]Part{}, seq: map[string]int{}}
		w.pending[key] = h
	}
	h.next++
	h.parts[author], h.seq[author] = part, h.next
	base := w.latest(key, stored)
	if stage != Settled && w.hold > 0 && !shown(base) {
		if h.first.IsZero() {
			h.first = now
			if stage == HubStage {
				// Another hub controller has this step to do (the
				// binding controller, the placement's Works): the hold
				// waits for its next sync (hubBehind).
				w.changes++
				h.changed = w.changes
			}
		}
		if stage == AgentStage && h.agentsAt.IsZero() {
			h.agentsAt = now
		}
		due := w.due(h)
		w.mu.Unlock()
		w.queue.AddAfter(key, due.Sub(now))
		return nil
	}
	w.mu.Unlock()
	if err := w.flush(ctx, key, stored); err != nil {
		w.mu.Lock()
		if h := w.pending[key]; h != nil {
			h.retry = true
		}
		w.mu.Unlock()
		w.queue.AddRateLimited(key)
		return err
	}
	return nil
}

// Observe records binding as returned by a write of its spec or metadata
// (the scheduler's placement): the next status write starts from it, not
// from a cache that has not seen it yet (which would conflict).
func (w *Writer) Observe(binding *workv1alpha1.ResourceBinding) {
	key := workobjects.Key(binding)
	w.mu.Lock()
	defer w.mu.Unlock()
	if b := w.written[key]; b == nil || b.UID != binding.UID || newer(binding.ResourceVersion, b.ResourceVersion) {
		w.written[key] = binding
	}
}

// shown: the binding's status has been written by the scheduler, so its
// controllers and people already read it and every change is written at
// once. So is a binding with a graceful eviction task (a failover of a
// binding that has not shown a status yet): the graceful eviction
// controller waits for its schedulerObservedGeneration and its aggregated
// status, and a failover must not wait for a hold. A binding without a
// placement (a dependency's, placed by requiredBy) never gets a Scheduled
// condition: it is written at once too.
func shown(b *workv1alpha1.ResourceBinding) bool {
	return meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.BindingConditionScheduled) != nil ||
		len(b.Spec.GracefulEvictionTasks) > 0 || b.Spec.Placement == nil
}

// due is when h's hold ends. Callers hold mu.
func (w *Writer) due(h *held) time.Time {
	return holdEnd(h.first, h.agentsAt, w.hold, h.changed > h.synced)
}

// holdEnd is when a new binding's held status is written although it has
// not settled: maxHoldFactor holds after its first held part at the latest
// (the hub's own stages, a controller failing and retrying); one hold
// after the first part that waits for agents (agentsAt, zero while none).
// Unless hubBehind: a change of the binding or its Works (the scheduler's
// placement, an agent's report) arrived that the binding controller has
// not synced yet. Then the wait is for the hub's own queue, not for the
// agents or a failing controller, and a status written now would say "no
// Work yet" or "waiting for the agent" about steps that are done, only to
// be replaced a moment later (under a fleet-wide backlog, 8–33% of the
// bindings of 10,000 templates at once; docs/benchmarks.md, issue 40):
// the hold lasts until that sync, MaxBehindFactor holds at most.
func holdEnd(first, agentsAt time.Time, hold time.Duration, hubBehind bool) time.Time {
	if hubBehind {
		return first.Add(MaxBehindFactor * hold)
	}
	end := first.Add(maxHoldFactor * hold)
	if !agentsAt.IsZero() {
		end = minTime(end, agentsAt.Add(hold))
	}
	return end
}

// Changed says that something the binding controller syncs key for (the
// binding, one of its Works, an agent's report on it) changed and the
// binding is queued for it. Only a binding whose parts are held keeps
// count; nothing is allocated for any other.
func (w *Writer) Changed(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.changes++
	if h := w.pending[key]; h != nil {
		h.changed = w.changes
	}
}

// Summing is called as the binding controller's sync of key starts,
// before it reads the binding and its Works: the sync sees every change
// counted so far. Pass the result to Summed once the sync is over.
func (w *Writer) Summing(string) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changes
}

// Summed says the sync of key that began with Summing's token is over
// (whether or not it submitted a part, and whether or not it failed: a
// failing controller is not a hub that is behind, and its binding's
// status is due as it was). If that ends a hold that was kept for the
// hub, the held parts are written now when due.
func (w *Writer) Summed(key string, token uint64) {
	w.mu.Lock()
	h := w.pending[key]
	if h == nil || token <= h.synced {
		w.mu.Unlock()
		return
	}
	wasBehind := h.changed > h.synced
	h.synced = token
	due, behind := w.due(h), h.changed > h.synced
	w.mu.Unlock()
	if wasBehind && !behind {
		w.queue.AddAfter(key, max(0, due.Sub(w.clock.Now())))
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// flushDue writes key's held parts if their hold has ended (the queue's
// delayed adds come for every held part; only the last one is due).
func (w *Writer) flushDue(ctx context.Context, key string) error {
	stored, err := w.bindings.Get(key)
	if apierrors.IsNotFound(err) {
		w.mu.Lock()
		delete(w.pending, key)
		w.mu.Unlock()
		w.denials.Allowed(key)
		return nil
	}
	if err != nil {
		return err
	}
	w.mu.Lock()
	h := w.pending[key]
	if h == nil {
		w.mu.Unlock()
		return nil
	}
	if due := w.due(h); !h.retry && !shown(w.latest(key, stored)) && w.clock.Now().Before(due) {
		w.mu.Unlock()
		w.queue.AddAfter(key, due.Sub(w.clock.Now()))
		return nil
	}
	w.mu.Unlock()
	return w.flush(ctx, key, stored)
}

// flush writes every part held for key onto the latest binding, if that
// changes its status.
func (w *Writer) flush(ctx context.Context, key string, stored *workv1alpha1.ResourceBinding) error {
	w.mu.Lock()
	h := w.pending[key]
	if h == nil || h.uid != stored.UID {
		w.mu.Unlock()
		return nil
	}
	base := w.latest(key, stored)
	updated := base.DeepCopy()
	carried := map[string]int{}
	for _, author := range authors(h) {
		h.parts[author](&updated.Status)
		carried[author] = h.seq[author]
	}
	w.mu.Unlock()

	if !apiequality.Semantic.DeepEqual(updated.Status, base.Status) {
		out, err := w.bindings.PatchStatus(ctx, base, updated)
		if err != nil {
			w.refused(base, key, err)
			return err
		}
		klog.FromContext(ctx).V(4).Info("Wrote binding status", "binding", key, "parts", len(carried))
		if out != base {
			// Kept as the cache keeps bindings until the cache catches up
			// with it (base, when nothing was written, is the cache's own).
			_, _ = cachetransform.Strip(out)
		}
		w.mu.Lock()
		w.written[key] = out
		w.mu.Unlock()
	}
	w.denials.Allowed(key)
	w.mu.Lock()
	defer w.mu.Unlock()
	if h := w.pending[key]; h != nil {
		for author, seq := range carried {
			if h.seq[author] == seq {
				delete(h.parts, author)
				delete(h.seq, author)
			}
		}
		if len(h.parts) == 0 {
			delete(w.pending, key)
		}
	}
	return nil
}

// refused says so when err is the apiserver refusing the hub the status
// write for want of a permission: a Warning event on the binding naming the
// missing verb, and a denial for the detector to show on the template.
// Other errors are retried as they are.
func (w *Writer) refused(binding *workv1alpha1.ResourceBinding, key string, err error) {
	d, ok := forbidden.Parse(err)
	if !ok {
		return
	}
	w.denials.Refused(key, d)
	if w.recorder != nil {
		w.recorder.Event(binding, corev1.EventTypeWarning, forbidden.EventReason,
			d.Message("the binding's status (scheduling result, applied state) cannot be written"))
	}
}

// authors returns h's authors in a fixed order (parts set disjoint fields;
// the order only makes writes reproducible). Callers hold mu.
func authors(h *held) []string {
	out := make([]string, 0, len(h.parts))
	for a := range h.parts {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}
