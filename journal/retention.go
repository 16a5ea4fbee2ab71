package journal

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/watchjournal/watchjournal/internal/storage"
)

// Retention bounds a journal; package compactor enforces it. Zero fields
// mean no limit of that kind. It is stored in the file (SetRetention) so
// that tools can show it.
type Retention struct {
	// MaxEvents is the most events to retain.
	MaxEvents uint64 `json:"maxEvents,omitempty"`
	// MaxBytes is the most payload to retain, in bytes (encoded events,
	// not file size).
	MaxBytes uint64 `json:"maxBytes,omitempty"`
	// MaxAge drops events journaled longer ago than this, the newest
	// included: a quiet journal may be trimmed empty (offsets still go on
	// from where they were).
	MaxAge time.Duration `json:"maxAge,omitempty"`
	// HardMaxBytes is a payload cap, in bytes, enforced even against
	// consumers that have not committed: above it the oldest events go and
	// those consumers get ErrTrimmed.
	HardMaxBytes uint64 `json:"hardMaxBytes,omitempty"`
}

const metaRetention = "retention"

// SetRetention records r in the file.
func (s Settings) SetRetention(r Retention) error {
	j := s.j
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return j.store.Update(func(tx storage.Tx) error { return tx.SetMeta(metaRetention, b) })
}

// Retention returns the retention recorded in the file; the zero value
// (no limits) when none is.
func (s Settings) Retention() (Retention, error) {
	j := s.j
	var r Retention
	err := j.store.View(func(tx storage.Tx) error {
		b := tx.Meta(metaRetention)
		if b == nil {
			return nil
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%w: retention: %v", ErrBadRecord, err)
		}
		return nil
	})
	return r, err
}
