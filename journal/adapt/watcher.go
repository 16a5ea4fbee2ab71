package adapt

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/watchjournal/watchjournal/journal"
)

// Options configure Watcher and Handle.
type Options struct {
	// Decode turns stored objects into runtime.Objects. Nil means
	// Unstructured.
	Decode DecodeFunc
	// Batch is how many events one read takes from the journal at most
	// (a read also stops after about 4 MiB of records). Default 256.
	Batch int
}

func (o Options) withDefaults() Options {
	if o.Decode == nil {
		o.Decode = Unstructured
	}
	if o.Batch <= 0 {
		o.Batch = 256
	}
	return o
}

// Watcher is a watch.Interface over a journal, with the shape of client-go's
// RetryWatcher (tools/watch): ResultChan, Stop, Done. Where a RetryWatcher
// started from resourceVersion R delivers the changes after R, a Watcher
// started from offset N delivers the journal's events from N on, and keeps
// delivering across 410s, disconnects and restarts of the writer.
//
// It ends, sending a watch.Error event first, only when the journal cannot
// be read; a *journal.CompactedError becomes a Status with code 410 (reason
// Expired), the same answer an apiserver gives for a compacted
// resourceVersion.
type Watcher struct {
	j      *journal.Journal
	dec    *decoder
	batch  int
	result chan watch.Event
	cancel context.CancelFunc
	done   chan struct{}
}

// NewWatcher starts a Watcher that delivers j's events from offset from;
// 0 means only events appended from now on. The goroutine it starts exits
// after Stop, or after an error event.
func NewWatcher(j *journal.Journal, from uint64, opts *Options) (*Watcher, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	if from == 0 {
		head, err := j.Head()
		if err != nil {
			return nil, fmt.Errorf("adapt: %w", err)
		}
		from = head + 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{j: j, dec: &decoder{decode: o.Decode}, batch: o.Batch,
		result: make(chan watch.Event), cancel: cancel, done: make(chan struct{})}
	go w.run(ctx, from)
	return w, nil
}

// ResultChan returns the channel of events. It is closed when the Watcher
// ends.
func (w *Watcher) ResultChan() <-chan watch.Event { return w.result }

// Stop ends the Watcher and closes ResultChan. It is safe to call more than
// once, and from any goroutine.
func (w *Watcher) Stop() { w.cancel() }

// Done is closed when the Watcher has ended and ResultChan is closed.
func (w *Watcher) Done() <-chan struct{} { return w.done }

func (w *Watcher) run(ctx context.Context, next uint64) {
	defer close(w.done)
	defer close(w.result)
	for {
		evs, err := w.j.Read(next, w.batch)
		if err != nil {
			w.send(ctx, watch.Event{Type: watch.Error, Object: statusFor(err)})
			return
		}
		for _, e := range evs {
			obj, err := w.dec.object(e)
			if err != nil {
				w.send(ctx, watch.Event{Type: watch.Error, Object: &metav1.Status{Status: metav1.StatusFailure,
					Code: http.StatusInternalServerError, Message: fmt.Sprintf("offset %d: decode: %v", e.Offset, err)}})
				return
			}
			if !w.send(ctx, watch.Event{Type: watch.EventType(e.Type), Object: obj}) {
				return
			}
			next = e.Offset + 1
		}
		if len(evs) == 0 {
			if err := w.j.Wait(ctx, next-1); err != nil {
				if ctx.Err() == nil {
					w.send(ctx, watch.Event{Type: watch.Error, Object: statusFor(err)})
				}
				return
			}
		}
	}
}

func (w *Watcher) send(ctx context.Context, e watch.Event) bool {
	select {
	case w.result <- e:
		return true
	case <-ctx.Done():
		return false
	}
}

// statusFor turns a read error into the Status a watch would carry.
func statusFor(err error) *metav1.Status {
	if errors.Is(err, journal.ErrCompacted) {
		return &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: err.Error()}
	}
	return &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError, Message: err.Error()}
}
