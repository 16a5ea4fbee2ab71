package jcache

// Secrets in one line: the data of Secrets is always kept, always sealed.
//
// An informer of typed or unstructured Secrets (or of a resource in
// Options.SealResources) keeps its objects sealed in its file
// (journal/seal.go), under the cache's key: the first of Options.Keyring
// or Options.KeyFiles when one is given, else a key made for this process
// (processKeys: 32 bytes of crypto/rand, held in memory only, never
// written down). Its index values are stored as keyed hashes
// (journal/sealfile.go). Metadata-only informers (PartialObjectMetadata)
// keep no data and seal nothing.
//
// A process key dies with the process, and with it what it sealed: the
// next process cannot open the file's objects. So each sealing file
// records, in its meta entry "jcache.sealKey", what it is sealed under:
// "process:" and the key's ID (journal.KeyID), or "keys" for a provisioned
// keyring. When a file is opened and it holds events sealed under another
// process's key (or it was sealed under provisioned keys and the cache
// now has none, or the reverse), it is started afresh before anything
// reads it: removed with its relist stage file and opened again, empty,
// and the loop lists every object (as transform.go does for a changed
// transform; handlers get OnAdd for each). Nothing is ever written in
// plaintext: the new file is sealed under the current key from its first
// event. A file sealed under provisioned keys, opened with provisioned
// keys, is kept (journal/seal.go's rotation: a key it lacks is a read's
// *journal.SealedError).
//
// Dropping a resource from sealing (a restart without it in
// SealResources) on a file that seals it fails the informer with the
// journal's *journal.SealingError: the file is not started afresh, which
// would write plaintext where the user once asked for none; remove the
// file to accept that.

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/watchjournal/watchjournal/journal"
)

// processKeys holds the keyring of caches given no key: one per process,
// so that caches of one directory share their files. Made on first use
// from crypto/rand (make).
type processKeys struct {
	once sync.Once
	ring *journal.Keyring
	err  error
}

// processKey is the process's keyring; a cache reads it through
// Options.processKeys, where a test can give a cache the keys of another
// process (testhooks.go).
var processKey processKeys

// keyring returns the keyring, made on first use.
func (p *processKeys) keyring() (*journal.Keyring, error) {
	p.once.Do(func() {
		key := make([]byte, journal.KeySize)
		if _, err := rand.Read(key); err != nil {
			p.err = fmt.Errorf("jcache: make a sealing key: %w", err)
			return
		}
		p.ring, p.err = journal.NewKeyring(key)
		clear(key)
	})
	return p.ring, p.err
}

// sealKeyMeta is the meta entry ("jcache.sealKey") recording what a
// file's objects are sealed under.
const sealKeyMeta = "sealKey"

// sealKeyID is what a file sealed under o's keyring records: "process:"
// and the key's ID for the process key, "keys" for a provisioned one.
func sealKeyID(o *Options) string {
	if ring, _ := o.processKeys().keyring(); o.Keyring == ring {
		return "process:" + o.Keyring.IDs()[0]
	}
	return "keys"
}

// checkSealKey records what j is sealed under, and reports whether it
// must be started afresh first: it holds events sealed under a key the
// cache lacks (see above). A file that does not seal has nothing to
// check.
func checkSealKey(j *journal.Journal, o *Options) (afresh bool, recorded string, err error) {
	if !j.Settings().Seals() {
		return false, "", nil
	}
	want := sealKeyID(o)
	m := j.Writer().Meta("jcache")
	old, err := m.Get(sealKeyMeta)
	if err != nil {
		return false, "", err
	}
	recorded = string(old)
	if recorded == want {
		return false, recorded, nil
	}
	head, err := j.Head()
	if err != nil {
		return false, recorded, err
	}
	// A provisioned keyring opens what it sealed before ("" is a file
	// sealed before the record, by a provisioned keyring).
	kept := want == "keys" && !strings.HasPrefix(recorded, "process:")
	if head > 0 && !kept {
		return true, recorded, nil
	}
	return false, recorded, m.Put(sealKeyMeta, []byte(want))
}

// openSealed opens res's journal at path, starting it afresh when its
// objects are sealed under a key the cache lacks (checkSealKey).
func openSealed(path string, res journal.Resource, o *Options) (*journal.Journal, error) {
	jo := &journal.Options{Resource: &res, Logger: o.Logger, NoSync: o.NoSync, Keyring: o.Keyring, SealResources: o.SealResources}
	for range 2 {
		j, err := journal.Open(path, jo)
		if errors.Is(err, journal.ErrSealingDropped) {
			return nil, fmt.Errorf("jcache: %s: %w (jcache.Options.SealResources no longer holds it)", res, err)
		}
		if err != nil {
			return nil, fmt.Errorf("jcache: %s: %w", res, err)
		}
		afresh, was, err := checkSealKey(j, o)
		if err != nil || !afresh {
			if err != nil {
				_ = j.Close()
				return nil, fmt.Errorf("jcache: %s: %w", res, err)
			}
			return j, nil
		}
		if err := j.Close(); err != nil {
			return nil, fmt.Errorf("jcache: %s: %w", res, err)
		}
		for _, p := range []string{path, path + ".relist"} {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("jcache: %s: start the file afresh: %w", res, err)
			}
		}
		o.Logger.Info("the cache file was sealed under a key this process does not hold: started afresh, its objects are listed again",
			"file", path, "was", cmp.Or(was, "unrecorded"), "now", sealKeyID(o))
	}
	return nil, fmt.Errorf("jcache: %s: %s sealed under another key after it was started afresh", res, path)
}
