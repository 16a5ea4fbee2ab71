package adapt

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/watchjournal/watchjournal/journal"
)

// Options configure Watcher and Handle.
type Options struct {
	// Decode turns an object as stored (journal.Event.Object: JSON as
	// served, with kind and apiVersion, or Kubernetes protobuf; valid only
	// during the call) into a fresh runtime.Object:
	// the shape of journal/cache's DecodeFunc[runtime.Object], whose
	// values it takes. Nil means into *unstructured.Unstructured.
	Decode func(stored []byte) (runtime.Object, error)
	// Batch is how many events one read takes from the journal at most
	// (a read also stops after about 4 MiB of records). Zero means
	// journal.DefaultBatch (256).
	Batch int
}

// withDefaults returns a copy of *opts (nil: the zero Options) with the
// defaults set.
func (opts *Options) withDefaults() Options {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Decode == nil {
		o.Decode = unstructuredObject
	}
	if o.Batch <= 0 {
		o.Batch = journal.DefaultBatch
	}
	return o
}

// Watcher is a watch.Interface over a journal, with the shape of client-go's
// RetryWatcher (tools/watch): ResultChan, Stop, Done. Where a RetryWatcher
// started from resourceVersion R delivers the changes after R, a Watcher
// started from offset N delivers the journal's events from N on, and keeps
// delivering across 410s, disconnects and restarts of the writer.
//
// A Watcher from WatchConsumer has a durable position: it resumes, in a
// new process, after the last event the receiver came back from (see
// WatchConsumer). One from NewWatcher
// starts where it is told and remembers nothing.
//
// It ends, sending a watch.Error event first, only when the journal cannot
// be read; a *journal.TrimmedError becomes a Status with code 410 (reason
// Expired), the same answer an apiserver gives for a compacted
// resourceVersion. Stop ends it without an error event.
type Watcher struct {
	j      *journal.Journal
	c      *journal.Consumer // nil for NewWatcher
	dec    *decoder
	batch  int
	result chan watch.Event
	events chan Event // the same events with offset and reason
	cancel context.CancelFunc
	done   chan struct{}
}

// Event is a watch.Event with what the journal knows beyond it: the
// journal event's offset and reason. watch.Event has no field for a
// reason, so a consumer that needs one reads Watcher.Events instead of
// ResultChan.
type Event struct {
	watch.Event
	// Offset is the journal event's offset; 0 for an ERROR event.
	Offset uint64
	// Reason is the journal event's journal.Reason: for a DELETED,
	// ReasonLeftSelector or ReasonMoved mean the object still exists on
	// the server, out of this journal's scope (not a deletion to act on);
	// ReasonGone, ReasonUnconfirmed or empty mean it was (or may have
	// been) deleted. For an ADDED, ReasonMoved means it came from another
	// shard. Empty for MODIFIED and ERROR.
	Reason journal.Reason
}

// IsDeletion reports whether e is a DELETED to act on as the object's
// deletion (journal.Event.IsDeletion): not one whose reason is
// left-selector or moved.
func (e Event) IsDeletion() bool {
	return journal.Event{Type: journal.EventType(e.Type), Reason: e.Reason}.IsDeletion()
}

// FromNow, as NewWatcher's from, starts after the journal's head as
// NewWatcher reads it: only events appended from then on. It is no offset
// (offsets start at 1 and stay far below it).
const FromNow uint64 = math.MaxUint64

// NewWatcher starts a Watcher that delivers j's events from offset from,
// as journal.Journal.Read reads them: 0 means the first retained offset,
// FromNow only events appended from now on. An offset below the first
// retained one ends the Watcher with a 410 error event (Watcher). The
// goroutine it starts exits after Stop, or after an error event. For a
// position that survives a restart, use WatchConsumer.
func NewWatcher(j *journal.Journal, from uint64, opts *Options) (*Watcher, error) {
	if from == 0 || from == FromNow {
		head, err := j.Head()
		if err != nil {
			return nil, fmt.Errorf("adapt: %w", err)
		}
		next := head + 1
		if from == 0 { // the first retained offset, as Read's 0; the next one if none is
			evs, err := j.Read(0, 1)
			if err != nil {
				return nil, fmt.Errorf("adapt: %w", err)
			}
			if len(evs) > 0 {
				next = evs[0].Offset
			}
		}
		from = next
	}
	return start(j, nil, from, opts), nil
}

// WatchConsumer starts a Watcher that delivers the events of c's journal
// from c's read position (right after its committed offset, for a consumer
// just returned by Consumers.Open) and commits c as the receiver shows it
// is done with events: an event counts as processed once the receiver has
// come back for more, that is once it has received the next event from
// ResultChan (or Events), and everything handed over counts as processed
// when Stop is called. The commit is written while the Watcher waits for
// the receiver or at the head, and after each read (one read is at most
// Options.Batch events), so the last event received stays uncommitted
// until the next one is received or Stop: a process that dies while it
// handles an event, or before it comes back, gets that event again from a
// new Watcher on the same consumer name (at least once), and one that died
// after coming back does not. Stop is the receiver's word that it is done
// with what it received: call it from the receiving goroutine (defer
// w.Stop()) or once that goroutine has finished, not while an event is
// still being handled. A receiver that hands events on to other
// goroutines comes back before they are processed: it needs a
// journal.Consumer it commits itself.
//
// The Watcher owns c until Done is closed: do not use c meanwhile. A commit
// that fails ends the Watcher with an error event.
func WatchConsumer(c *journal.Consumer, opts *Options) (*Watcher, error) {
	if c == nil {
		return nil, errors.New("adapt: WatchConsumer: nil consumer")
	}
	from := c.Position()
	if from == 0 {
		from = 1
	}
	return start(c.Journal(), c, from, opts), nil
}

func start(j *journal.Journal, c *journal.Consumer, from uint64, opts *Options) *Watcher {
	o := opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{j: j, c: c, dec: &decoder{decode: o.Decode, j: j}, batch: o.Batch,
		result: make(chan watch.Event), events: make(chan Event), cancel: cancel, done: make(chan struct{})}
	go w.run(ctx, from)
	return w
}

// ResultChan returns the channel of events. It is closed when the Watcher
// ends.
func (w *Watcher) ResultChan() <-chan watch.Event { return w.result }

// Events returns the channel of events with their offsets and reasons
// (Event). It carries the same events as ResultChan: each event is
// delivered once, on whichever of the two channels receives it, so read
// one of them, not both. For WatchConsumer's commit, a receive from either
// counts as coming back for more. It is closed when the Watcher ends.
func (w *Watcher) Events() <-chan Event { return w.events }

// Stop ends the Watcher and closes ResultChan. It is safe to call more than
// once, and from any goroutine. For WatchConsumer it commits every event
// handed over: call it once the receiver is done with them.
func (w *Watcher) Stop() { w.cancel() }

// Done is closed when the Watcher has ended and ResultChan is closed (and,
// for WatchConsumer, its last commit is written: after Stop, every event
// handed over).
func (w *Watcher) Done() <-chan struct{} { return w.done }

// run reads and hands over events. For WatchConsumer it tracks two
// offsets: last, the newest event handed over (received), and done, the
// newest the receiver came back after (the one before last). The loop
// commits done before it blocks on the receiver or at the head, and after
// each read; the exit commits last (Stop, or an error event the receiver
// took, which is coming back too). A receiver always ready costs one
// commit a read; a busy one a commit per event, written while it works.
func (w *Watcher) run(ctx context.Context, next uint64) {
	defer close(w.done)
	defer close(w.result)
	defer close(w.events)
	committed, done, last := next-1, next-1, next-1
	commit := func(upto uint64) error {
		if w.c == nil || upto <= committed {
			return nil
		}
		if err := w.c.Commit(upto); err != nil {
			return err
		}
		committed = upto
		return nil
	}
	// Every exit comes after a send returned: received (the receiver came
	// back) or Stop. Either way what was handed over is processed.
	defer func() { _ = commit(last) }()
	for {
		evs, err := w.j.Read(next, w.batch)
		if err != nil {
			w.send(ctx, errorEvent(statusFor(err)))
			return
		}
		for _, e := range evs {
			obj, err := w.dec.object(e)
			if err != nil {
				w.send(ctx, errorEvent(&metav1.Status{Status: metav1.StatusFailure,
					Code: http.StatusInternalServerError, Message: fmt.Sprintf("offset %d: decode: %v", e.Offset, err)}))
				return
			}
			ev := Event{Event: watch.Event{Type: watch.EventType(e.Type), Object: obj}, Offset: e.Offset, Reason: e.Reason}
			if !w.trySend(ev) {
				// The receiver is busy with the last event: write what it
				// came back after while waiting for it, so a receiver that
				// comes back and then dies is not handed it again.
				if err := commit(done); err != nil {
					w.send(ctx, errorEvent(statusFor(err)))
					return
				}
				if !w.send(ctx, ev) {
					return
				}
			}
			done, last = last, e.Offset
			next = e.Offset + 1
		}
		if err := commit(done); err != nil {
			w.send(ctx, errorEvent(statusFor(err)))
			return
		}
		if len(evs) == 0 {
			if err := w.j.Wait(ctx, next-1); err != nil {
				if ctx.Err() == nil {
					w.send(ctx, errorEvent(statusFor(err)))
				}
				return
			}
		}
	}
}

// trySend hands e over if a receiver is waiting on ResultChan or Events.
func (w *Watcher) trySend(e Event) bool {
	select {
	case w.result <- e.Event:
		return true
	case w.events <- e:
		return true
	default:
		return false
	}
}

// send hands e over on ResultChan or Events, whichever receives it first.
func (w *Watcher) send(ctx context.Context, e Event) bool {
	select {
	case w.result <- e.Event:
		return true
	case w.events <- e:
		return true
	case <-ctx.Done():
		return false
	}
}

func errorEvent(s *metav1.Status) Event {
	return Event{Event: watch.Event{Type: watch.Error, Object: s}}
}

// statusFor turns a read error into the Status a watch would carry.
func statusFor(err error) *metav1.Status {
	if errors.Is(err, journal.ErrTrimmed) {
		return &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: err.Error()}
	}
	return &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError, Message: err.Error()}
}
