package main

// Sealing keys (journal/seal.go): watch seals the objects of Secrets (and
// of --seal-resource's resources) under --seal-key-file's primary key;
// events opens them with any key of --seal-key-file. A key file holds 32
// raw bytes, or the base64 of one key a line (the primary first), as a
// mounted Secret holds it; the flag repeats, files in order. The read
// commands carry the keyring to openSource in their context
// (withKeyring), so that every source they reopen while following has it.

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
)

const sealKeyFileUsage = "sealing key `FILE`: 32 raw bytes, or the base64 of one key a line (the primary first), as a mounted Secret holds it; repeatable, the first file's first key is the primary"

// addSealKeyFlag adds --seal-key-file to cmd.
func addSealKeyFlag(cmd *cobra.Command, files *[]string, usage string) {
	cmd.Flags().StringArrayVar(files, "seal-key-file", nil, usage)
}

// loadKeyring reads the key files, nil for none.
func loadKeyring(files []string) (*journal.Keyring, error) {
	if len(files) == 0 {
		return nil, nil
	}
	k, err := journal.LoadKeyring(files...)
	if err != nil {
		return nil, fmt.Errorf("--seal-key-file: %w", err)
	}
	return k, nil
}

// parseSealResources parses --seal-resource's values, resource[.group]
// (secrets, configmaps, widgets.example.com).
func parseSealResources(vals []string) ([]schema.GroupResource, error) {
	var out []schema.GroupResource
	for _, v := range vals {
		gr := schema.ParseGroupResource(v)
		if gr.Resource == "" {
			return nil, fmt.Errorf("--seal-resource %q: want resource[.group]", v)
		}
		out = append(out, gr)
	}
	return out, nil
}

type keyringKey struct{}

// withKeyring returns ctx carrying k for openSource.
func withKeyring(ctx context.Context, k *journal.Keyring) context.Context {
	if k == nil {
		return ctx
	}
	return context.WithValue(ctx, keyringKey{}, k)
}

// keyringFrom returns the keyring ctx carries, nil when none.
func keyringFrom(ctx context.Context) *journal.Keyring {
	k, _ := ctx.Value(keyringKey{}).(*journal.Keyring)
	return k
}
