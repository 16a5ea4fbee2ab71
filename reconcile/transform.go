package reconcile

// Transforms before the disk.
//
// Options.Transform rewrites every object before it is stored: the
// objects of watch events (a DELETED's last object included), of list and
// relist pages, and of streaming lists all become Items in two places of
// the client (item for JSON, eventItem for protobuf), and both call
// transformed. So what the transform removes never reaches the journal's
// records, its objects bucket or a relist's stage file; tombstones a
// relist infers carry no object of their own.
//
// The journal keys on the object's name, namespace, UID and
// resourceVersion: the transformed object must keep them. transformed
// reads them again from the result and refuses one that changed them
// (ErrTransform): the object is not stored, and the request fails as an
// undecodable one does (retried with backoff, Status.LastError names it).

import (
	"bytes"
	"fmt"

	jsoniter "github.com/json-iterator/go"
)

// transformed returns it with its Object replaced by the client's
// transform of it; it as is when there is no transform or no object.
func (c *client) transformed(it Item) (Item, error) {
	if c.transform == nil || it.Object == nil {
		return it, nil
	}
	out, err := c.transform(it.Object)
	if err != nil {
		return Item{}, fmt.Errorf("%w: %s: %w", ErrTransform, it.Key, err)
	}
	var got Item
	if bytes.HasPrefix(out, protoMagic) {
		o, err := unwrapProto(out)
		if err == nil {
			got, err = protoItem(o)
		}
		if err != nil {
			return Item{}, fmt.Errorf("%w: %s: the result does not decode: %w", ErrTransform, it.Key, err)
		}
	} else {
		got, err = readItemMeta(jsoniter.ParseBytes(jsonAPI, out), false)
		if err != nil {
			return Item{}, fmt.Errorf("%w: %s: the result does not decode: %w", ErrTransform, it.Key, err)
		}
	}
	if got.Key != it.Key || got.UID != it.UID || got.ResourceVersion != it.ResourceVersion {
		return Item{}, fmt.Errorf("%w: %s (uid %s, resourceVersion %s) became %s (uid %s, resourceVersion %s): a transform must keep name, namespace, uid and resourceVersion",
			ErrTransform, it.Key, it.UID, it.ResourceVersion, got.Key, got.UID, got.ResourceVersion)
	}
	it.Object = out
	return it, nil
}
