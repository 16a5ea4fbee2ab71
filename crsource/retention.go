package crsource

// Retention: a source made by New runs a compactor (package compactor)
// beside its writer, under Options.Retention, jcache.DefaultRetention
// unless set: 64 MiB of encoded events beyond what the consumer has
// committed. The consumer holds retention (the compactor never trims an
// event the controller has not committed, unless a hard cap is set), so
// the default never costs the controller an event; it bounds the history
// kept behind the commit, which is what grew without limit before.
// Compactor.Run records the policy in the file, so journalctl stats shows
// the retention in effect. A source made by NewFromConsumer runs none:
// the caller owns the journal and its retention.

import (
	"cmp"
	"context"
	"fmt"
	"sync"

	"github.com/watchjournal/watchjournal/jcache"
	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/compactor"
)

// DefaultRetention is the retention of a source's journal when
// Options.Retention is nil: jcache.DefaultRetention (at most 64 MiB of
// encoded events beyond the consumer's committed offset; no count, age or
// hard limit).
var DefaultRetention = jcache.DefaultRetention

// retention returns the policy opts ask for and whether any limit is set.
func retention(opts Options) (journal.Retention, bool) {
	p := DefaultRetention
	if opts.Retention != nil {
		p = *opts.Retention
	}
	return p, p != (journal.Retention{})
}

// runWriter runs the journal's writer (the loop) and, when the source
// retains, its compactor beside it, until ctx is done or one of them fails:
// retention goes with the writer, so a warm standby's journal (standby.go,
// whose writer runs on every replica) is bounded as the leader's is.
func (s *Source) runWriter(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var rerr error
	if s.retains {
		wg.Go(func() {
			err := compactor.New(s.j, s.retention, compactor.Options{Logger: s.log}).Run(ctx)
			if err != nil && ctx.Err() == nil {
				rerr = fmt.Errorf("crsource: retention: %w", err)
				cancel()
			}
		})
	}
	err := s.loop.Run(ctx)
	if err != nil {
		err = fmt.Errorf("crsource: journal writer: %w", err)
	}
	cancel()
	wg.Wait()
	return cmp.Or(err, rerr)
}
