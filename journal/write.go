package journal

// The write side.
//
// Journal is what a reader and a consumer use. Writing is one type,
// Writer, that whoever runs the loop holds (package reconcile's Loop, and
// beside it the compactor's retention and a shard member's Reshard). Its
// methods live next to the code they drive: tx.go (Update, Tx), relist.go
// and stagefile.go (BeginRelist, Relist), consumer.go (Trim,
// TrimRetained), resource.go (SetKind), meta.go (Meta), shard.go and
// reshard.go (Reshard, the pending ranges).
//
// One writer per file: Open for writing takes the file's exclusive lock
// (ErrLocked for a second process), so every Writer of a file lives in the
// process that holds it. A read-only Open holds no lock, and its Writer's
// writes return ErrReadOnly. Within the process, the rule that one loop
// appends the events is the caller's: two loops would each keep the file
// consistent per transaction, but would race each other's
// resourceVersions.

// Writer is the write side of an open Journal: write transactions, the
// staged relist, retention trimming, the file's kind and settings of the
// packages above, and Reshard. Get it from Journal.Writer.
//
// One writer per file, enforced by the lock that Open for writing takes:
// a second process's Open fails with ErrLocked. In the process that holds
// the lock, one reconcile loop appends events; a compactor (Trim) and a
// shard member (Reshard, with the loop stopped) may act beside it. Every
// method that writes returns an error matching ErrReadOnly on a journal
// opened read-only, and ErrClosed after Close. A Writer is safe for
// concurrent use; its writes are serialized with the journal's (a Relist
// it begins is not: see Relist).
type Writer struct{ j *Journal }

// Writer returns j's write side. Every call returns a writer of the same
// file; on a journal opened read-only its writes return ErrReadOnly.
func (j *Journal) Writer() *Writer { return &Writer{j: j} }

// ReshardResult is what a Writer.Reshard did.
type ReshardResult struct {
	// Left is how many keys left the range, each journaled as DELETED
	// with reason moved.
	Left int
	// Entered is the part of the hash space the range gained, as a
	// canonical KEP-5866 shard selector, "" when it only shrank; its keys
	// arrive with the next list.
	Entered string
	// First and Last are the offsets of the DELETED events, 0 when none.
	First, Last uint64
}
