package journal

// Settings is what a file keeps about itself beside its events: the
// retention recorded for package compactor (retention.go), whether it
// keeps objects (objects.go), how it seals (seal.go, sealfile.go), and
// what it costs: the retained events' bytes (consumer.go) and the pages
// mapped into memory (journal.go). Get it from Journal.Settings; it is
// safe for concurrent use. The settings that write (SetRetention,
// KeepObjects) return ErrReadOnly on a journal opened read-only.
type Settings struct{ j *Journal }

// Settings returns j's settings, sealing and storage footprint.
func (j *Journal) Settings() Settings { return Settings{j: j} }
