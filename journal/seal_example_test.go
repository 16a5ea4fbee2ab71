package journal_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
)

// Seal a journal of Secrets under a key file (as a mounted Secret holds
// it: base64 of 32 random bytes), read the object back with the key, and
// see what a reader without it gets.
func ExampleLoadKeyring() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	key := make([]byte, journal.KeySize)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(dir, "seal.key")
	_ = os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600)

	keys, err := journal.LoadKeyring(keyFile) // to rotate: LoadKeyring(newKeyFile, oldKeyFile)
	if err != nil {
		log.Fatal(err)
	}
	res := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: "demo"}
	path := filepath.Join(dir, "secrets.db")
	j, err := journal.Open(path, &journal.Options{Resource: &res, Keyring: keys})
	if err != nil {
		log.Fatal(err)
	}
	secret := []byte(`{"kind":"Secret","apiVersion":"v1","metadata":{"name":"db"},"data":{"password":"aHVudGVyMg=="}}`)
	err = j.Writer().Update(func(tx *journal.Tx) error {
		_, err := tx.Append(&journal.Event{Type: journal.Added, Key: "demo/db", UID: "u-1", ResourceVersion: "7", Origin: journal.OriginWatch, Object: secret})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	evs, _ := j.Read(1, 1)
	fmt.Println("with the key:", bytes.Equal(evs[0].Object, secret))
	_ = j.Close()

	file, _ := os.ReadFile(path)
	fmt.Println("in the file:", bytes.Contains(file, []byte("aHVudGVyMg==")))

	j, _ = journal.Open(path, &journal.Options{ReadOnly: true})
	defer j.Close()
	_, err = j.Read(1, 1)
	fmt.Println("without the key:", errors.Is(err, journal.ErrSealed))
	e, _, _ := j.Lookup("demo/db")
	fmt.Println("index:", e.ResourceVersion)
	// Output:
	// with the key: true
	// in the file: false
	// without the key: true
	// index: 7
}
