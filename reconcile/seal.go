package reconcile

// Sensitive resources: the loop writes their objects only sealed.
//
// A journal of Secrets (or of a resource the journal was told is sensitive,
// journal.Options.SealResources) that keeps more than metadata stores its
// objects sealed under the journal's keyring (journal/seal.go). New refuses
// such a journal opened without a keyring, and a journal of Secrets without
// the SecretPayloads opt-in, with ErrSecretPayloads saying how to enable
// it: the plaintext data of a Secret never reaches the disk.

import (
	"fmt"

	"github.com/watchjournal/watchjournal/journal"
)

// checkSealing returns why the loop may not write j's objects of res, nil
// when it may.
func checkSealing(j *journal.Journal, res journal.Resource, opts Options) error {
	if res.MetadataOnly {
		return nil
	}
	secrets := res.GVR.Group == "" && res.GVR.Resource == "secrets"
	if secrets && !opts.SecretPayloads {
		return fmt.Errorf("%w: set journal.Resource.MetadataOnly, or Options.SecretPayloads with a sealing key (journal.Options.Keyring; journalctl watch --secret-payloads --seal-key-file FILE)", ErrSecretPayloads)
	}
	if j.Settings().Sensitive() && !j.Settings().Seals() {
		return fmt.Errorf("%w: the objects of %s would reach the disk in plaintext: open the journal with journal.Options.Keyring "+
			"(journal.LoadKeyring of a file of 32 random bytes or their base64; journalctl --seal-key-file FILE) so that they are sealed", ErrSecretPayloads, res.GVR.GroupResource())
	}
	return nil
}
