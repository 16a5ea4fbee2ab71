package journal

// A relist's events wait in a sibling file, <path>.relist, until the list is
// complete, and only then move into the bbolt file. Staging them inside the
// bbolt file would make every initial list write N records into a bucket
// and free those pages again: bbolt's freelist keeps an entry per page
// allocated from free pages (its allocs map), so the journal's pages
// reusing the staging pages would cost the process about 12 bytes of heap
// per object for as long as the file stays open (BenchmarkJournalHeap). Appends at the end of the file make no
// such entries. A plain append-only file also needs no transaction, and no
// fsync, per page; it is fsynced once, before the commit marker is set.
//
// Format: the 8-byte magic "wjstage1", an 8-byte big-endian nonce, then
// records, each a 4-byte big-endian length and an encoded event (which
// carries its own CRC-32C). The bbolt file's meta records the nonce and the
// file's size with the commit marker, and the position of the next record
// to move with every chunk it moves, in the same transaction as the chunk.
// A stage file that is missing, foreign or short when a marker needs it
// cannot be rolled forward; Open then forgets the resourceVersion so that
// the next run relists, and the relist's diff closes the gap (the index is
// never wrong about what the journal says, only behind the server).

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
)

var stageMagic = []byte("wjstage1")

const stageHeader = 16 // magic + nonce

// stagePath returns the stage file's path for the journal at path.
func stagePath(path string) string { return path + ".relist" }

// stageWriter appends records to a new stage file.
type stageWriter struct {
	f     *os.File
	w     *bufio.Writer
	nonce uint64
	size  int64
}

// createStage creates (or truncates) the stage file at path.
func createStage(path string) (*stageWriter, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, stageErr(err)
	}
	s := &stageWriter{f: f, w: bufio.NewWriterSize(f, 256<<10), nonce: rand.Uint64()}
	var h [stageHeader]byte
	copy(h[:], stageMagic)
	binary.BigEndian.PutUint64(h[8:], s.nonce)
	if _, err := s.w.Write(h[:]); err != nil {
		s.discard(path)
		return nil, stageErr(err)
	}
	s.size = stageHeader
	return s, nil
}

// add appends one encoded record.
func (s *stageWriter) add(rec []byte) error {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(rec)))
	if _, err := s.w.Write(n[:]); err != nil {
		return stageErr(err)
	}
	if _, err := s.w.Write(rec); err != nil {
		return stageErr(err)
	}
	s.size += int64(4 + len(rec))
	return nil
}

// finish flushes the file and, unless noSync, fsyncs it and its directory,
// so that the marker that will name it never outlives it.
func (s *stageWriter) finish(noSync bool) error {
	if err := s.w.Flush(); err != nil {
		return stageErr(err)
	}
	if noSync {
		return nil
	}
	if err := s.f.Sync(); err != nil {
		return stageErr(err)
	}
	d, err := os.Open(filepath.Dir(s.f.Name()))
	if err != nil {
		return stageErr(err)
	}
	defer d.Close()
	return stageErr(d.Sync())
}

// discard closes and removes the file.
func (s *stageWriter) discard(path string) {
	_ = s.f.Close()
	_ = os.Remove(path)
}

// errStageLost says the stage file a commit marker names cannot be used.
var errStageLost = errors.New("stage file lost")

// stageReader reads the records of a stage file from a position up to the
// size its commit marker records.
type stageReader struct {
	f    *os.File
	r    *bufio.Reader
	pos  int64
	size int64
}

// stageRecordError is a stage-file record whose length runs past the end
// of what the commit marker says the file holds (a corrupt length): the
// record is refused before anything is allocated for it. It matches the
// lost-stage case, so Open recovers as for a lost stage file (the next
// run relists).
type stageRecordError struct {
	// Path is the stage file's path.
	Path string
	// Pos is the record's position in the file, in bytes.
	Pos int64
	// Length is the record length the file claims, in bytes.
	Length uint32
	// Left is how many bytes the file holds after the length field.
	Left int64
}

// Error returns the message, with the position and both lengths.
func (e *stageRecordError) Error() string {
	return fmt.Sprintf("journal: stage file %s: record at %d claims %d bytes, the file holds %d after it",
		e.Path, e.Pos, e.Length, e.Left)
}

// Unwrap returns errStageLost: the stage file cannot be rolled forward.
func (e *stageRecordError) Unwrap() error { return errStageLost }

// stageMarkerError is returned by a relist commit (Relist.Commit, Open,
// BeginRelist) when the chunk it is about to move finds the commit marker
// not as the previous chunk left it: another writer moved the commit on,
// finished it (no marker) or began another (another nonce). Nothing of that
// chunk is written, and the commit stops: going on would append again what
// the other writer appended. With one writer per file for the writer's
// whole life (the writer's lock, bolt.LockWriter) it does not happen;
// the check turns a breach of that into an error instead of duplicate events.
type stageMarkerError struct {
	// Path is the stage file's path.
	Path string
	// Nonce and Pos are the stage file's nonce and the position, in bytes,
	// the chunk continues from.
	Nonce uint64
	Pos   int64
	// Present is false when the file holds no commit marker any more.
	Present bool
	// FoundNonce and FoundPos are what the marker holds when Present (0
	// when it does not decode).
	FoundNonce uint64
	FoundPos   int64
}

// Error returns the message, with what was expected and what was found.
func (e *stageMarkerError) Error() string {
	if !e.Present {
		return fmt.Sprintf("journal: relist commit from %s: the commit marker (nonce %x, position %d) is gone: another writer finished the commit",
			e.Path, e.Nonce, e.Pos)
	}
	return fmt.Sprintf("journal: relist commit from %s: the commit marker holds nonce %x, position %d; this commit continues from nonce %x, position %d: another writer moved it",
		e.Path, e.FoundNonce, e.FoundPos, e.Nonce, e.Pos)
}

// openStage opens the stage file at path for reading at pos, checking that
// it is the file with nonce and at least size bytes long. A mismatch wraps
// errStageLost.
func openStage(path string, nonce uint64, size, pos int64) (*stageReader, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist", errStageLost, path)
	}
	if err != nil {
		return nil, err
	}
	var h [stageHeader]byte
	fi, err := f.Stat()
	if err == nil {
		_, err = io.ReadFull(f, h[:])
	}
	switch {
	case err != nil:
		_ = f.Close()
		return nil, fmt.Errorf("%w: %s: %v", errStageLost, path, err)
	case string(h[:8]) != string(stageMagic) || binary.BigEndian.Uint64(h[8:]) != nonce:
		_ = f.Close()
		return nil, fmt.Errorf("%w: %s belongs to another relist", errStageLost, path)
	case fi.Size() < size || pos < stageHeader || pos > size:
		_ = f.Close()
		return nil, fmt.Errorf("%w: %s is %d bytes, the commit needs %d from %d", errStageLost, path, fi.Size(), size, pos)
	}
	if _, err := f.Seek(pos, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, err
	}
	return &stageReader{f: f, r: bufio.NewReaderSize(f, 256<<10), pos: pos, size: size}, nil
}

// next returns the next record and the position after it.
func (s *stageReader) next() ([]byte, int64, error) {
	var n [4]byte
	if _, err := io.ReadFull(s.r, n[:]); err != nil {
		return nil, s.pos, fmt.Errorf("%w: at %d: %v", errStageLost, s.pos, err)
	}
	length := binary.BigEndian.Uint32(n[:])
	if left := s.size - s.pos - 4; int64(length) > left {
		return nil, s.pos, &stageRecordError{Path: s.f.Name(), Pos: s.pos, Length: length, Left: left}
	}
	rec := make([]byte, length)
	if _, err := io.ReadFull(s.r, rec); err != nil {
		return nil, s.pos, fmt.Errorf("%w: at %d: %v", errStageLost, s.pos, err)
	}
	s.pos += int64(4 + len(rec))
	return rec, s.pos, nil
}

func (s *stageReader) close() { _ = s.f.Close() }

// stageErr marks a full disk with ErrNoSpace.
func stageErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: stage file: %w", ErrNoSpace, err)
	}
	return fmt.Errorf("journal: stage file: %w", err)
}
