package reconcile

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func listBody(kind string, n int, itemsFirst bool) string {
	var items []string
	for i := range n {
		items = append(items, fmt.Sprintf(`{"metadata":{"name":"cm%d","namespace":"ns","uid":"u%d","resourceVersion":"%d","managedFields":[{"manager":"m"}]},"data":{"k":"%s"}}`,
			i, i, 100+i, strings.Repeat("x", 100)))
	}
	head := fmt.Sprintf(`"kind":%q,"apiVersion":"v1","metadata":{"resourceVersion":"123","continue":"tok"}`, kind)
	arr := `"items":[` + strings.Join(items, ",") + `]`
	if itemsFirst {
		return "{" + arr + "," + head + "}"
	}
	return "{" + head + "," + arr + "}"
}

// A page decodes the same from a stream that hands over one byte at a
// time, whatever the order of its fields, with or without objects.
func TestDecodePage(t *testing.T) {
	c := &client{}
	for _, tc := range []struct {
		name       string
		kind       string
		meta       bool
		itemsFirst bool
	}{
		{"full", "ConfigMapList", false, false},
		{"full, items before kind", "ConfigMapList", false, true},
		{"metadata", "PartialObjectMetadataList", true, false},
		{"metadata, items first", "PartialObjectMetadataList", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 700 // more than the read buffer
			body := listBody(tc.kind, n, tc.itemsFirst)
			var items []Item
			p, kind, err := c.decodePage(iotest.OneByteReader(strings.NewReader(body)), tc.meta, func(it Item) error { items = append(items, it); return nil })
			if err != nil {
				t.Fatal(err)
			}
			p.Items = items
			if kind != tc.kind || p.ResourceVersion != "123" || p.Continue != "tok" || len(p.Items) != n {
				t.Fatalf("page = kind %q rv %q continue %q, %d items; want %q 123 tok %d", kind, p.ResourceVersion, p.Continue, len(p.Items), tc.kind, n)
			}
			for i, it := range p.Items {
				if it.Key != fmt.Sprintf("ns/cm%d", i) || it.UID != fmt.Sprintf("u%d", i) || it.ResourceVersion != fmt.Sprint(100+i) {
					t.Fatalf("item %d = %+v", i, it)
				}
				if tc.meta != (it.Object == nil) {
					t.Fatalf("item %d: object %q with meta=%v", i, it.Object, tc.meta)
				}
				if !tc.meta && !strings.HasPrefix(string(it.Object), `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm`) {
					t.Fatalf("item %d: object %.80s; want kind and apiVersion put back", i, it.Object)
				}
			}
		})
	}
}

// Broken pages are errors, never a short page.
func TestDecodePage_Errors(t *testing.T) {
	c := &client{}
	whole := listBody("ConfigMapList", 3, false)
	for name, body := range map[string]string{
		"truncated":      whole[:len(whole)/2],
		"no uid":         `{"kind":"ConfigMapList","items":[{"metadata":{"name":"a","resourceVersion":"1"}}]}`,
		"not an object":  `[1,2]`,
		"status":         `{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}`,
		"garbage inside": `{"kind":"ConfigMapList","items":[{"metadata":{"name":"a","uid":"u","resourceVersion":"1"}},x]}`,
	} {
		for _, meta := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/meta=%v", name, meta), func(t *testing.T) {
				n := 0
				_, _, err := c.decodePage(io.MultiReader(strings.NewReader(body)), meta, func(Item) error { n++; return nil })
				if err == nil {
					t.Fatalf("decodePage(%.60q) = %d items, nil error; want an error", body, n)
				}
			})
		}
	}
}

// An error of the callback ends the read and comes back unwrapped.
func TestDecodePage_StopsAtCallbackError(t *testing.T) {
	c := &client{}
	stop := errRestart{}
	n := 0
	_, _, err := c.decodePage(strings.NewReader(listBody("ConfigMapList", 10, false)), false, func(Item) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if _, ok := err.(errRestart); !ok || n != 3 {
		t.Fatalf("decodePage = %v after %d items; want errRestart after 3", err, n)
	}
}
