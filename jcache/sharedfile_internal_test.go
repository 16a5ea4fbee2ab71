package jcache

import (
	"bytes"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/shards"
)

// Two caches' options conflict on a file only in what decides that file's
// contents or writing, compared as they take effect: the effective
// retention, the key of a file that seals, whether the file seals, and the
// member of a shard group's ranged file; never a deprecated option or one
// the cache sets itself.
func TestOptionsConflict(t *testing.T) {
	ring, err := processKey.keyring()
	if err != nil {
		t.Fatal(err)
	}
	other, err := journal.NewKeyring(bytes.Repeat([]byte{7}, journal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	tokens := schema.GroupResource{Group: "x.io", Resource: "tokens"}
	configMaps := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	secrets := journal.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}}
	secretsMeta := secrets
	secretsMeta.MetadataOnly = true
	tokensFile := journal.Resource{GVR: tokens.WithVersion("v1")}
	def, small := DefaultRetention, journal.Retention{MaxBytes: 1 << 20}
	shard := func(member string) *ShardOptions {
		return &ShardOptions{Group: "g", Member: member, Resources: []schema.GroupResource{configMaps.GVR.GroupResource()}}
	}
	base := Options{NoSync: true, Keyring: ring}
	with := func(f func(o *Options)) Options { o := base; f(&o); return o }
	for _, tc := range []struct {
		name   string
		b      Options
		res    journal.Resource
		ranged bool
		want   string
	}{
		{"the same options", base, configMaps, false, ""},
		{"Retention nil and DefaultRetention", with(func(o *Options) { o.Retention = &def }), configMaps, false, ""},
		{"another Retention", with(func(o *Options) { o.Retention = &small }), configMaps, false, "Retention"},
		{"the deprecated SecretPayloads", with(func(o *Options) { o.SecretPayloads = true }), secrets, false, ""},
		{"Loop.SecretPayloads, which the feed sets", with(func(o *Options) { o.Loop.SecretPayloads = true }), secrets, false, ""},
		{"NoSync", with(func(o *Options) { o.NoSync = false }), configMaps, false, "NoSync"},
		{"SealResources of another resource's file", with(func(o *Options) { o.SealResources = []schema.GroupResource{tokens} }), configMaps, false, ""},
		{"SealResources of the file's resource", with(func(o *Options) { o.SealResources = []schema.GroupResource{tokens} }), tokensFile, false, "SealResources"},
		{"another Keyring on a file nothing seals", with(func(o *Options) { o.Keyring = other }), configMaps, false, ""},
		{"another Keyring on a metadata-only Secrets file", with(func(o *Options) { o.Keyring = other }), secretsMeta, false, ""},
		{"another Keyring on a Secrets file", with(func(o *Options) { o.Keyring = other }), secrets, false, "Keyring"},
		{"another Member on a ranged file", with(func(o *Options) { o.Shard = shard("b") }), configMaps, true, "Shard.Member"},
		{"another Member on a file of the whole resource", with(func(o *Options) { o.Shard = shard("b") }), configMaps, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := base
			if tc.b.Shard != nil {
				a.Shard = shard("a")
			}
			if got := optionsConflict(&a, &tc.b, tc.res, tc.ranged); got != tc.want {
				t.Errorf("optionsConflict(%s, ranged %v) = %q; want %q", tc.res, tc.ranged, got, tc.want)
			}
		})
	}
	t.Run("an empty Member and the default member", func(t *testing.T) {
		a, b := with(func(o *Options) { o.Shard = shard("") }), with(func(o *Options) { o.Shard = shard(shards.DefaultMember()) })
		if got := optionsConflict(&a, &b, configMaps, true); got != "" {
			t.Errorf("optionsConflict = %q; want \"\"", got)
		}
	})
}
