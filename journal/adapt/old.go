package adapt

// The old object of an update (Handle's OnUpdate).
//
// A MODIFIED record holds the new object and PrevResourceVersion, not the
// old object. The old one is in the journal all the same: it is the
// object of the key's previous event, the ADDED or MODIFIED that set the
// resourceVersion PrevResourceVersion names, unless retention trimmed it.
// The journal records where that event is: Event.PrevOffset, the offset
// the key's index entry pointed at when the MODIFIED was appended, written
// in the same transaction. So the old object is one Journal.Read of one
// record at PrevOffset, checked to be the key's ADDED or MODIFIED with the
// same UID at PrevResourceVersion, carrying an object.
//
// Cost: per MODIFIED one Journal.Read of one record; no memory kept
// between events, whatever the number of keys.
//
// In a metadata-only journal the previous event's object is its metadata
// (labels and annotations included, as stored), and so is the old object.
//
// Otherwise the old object is the metadata-only object Handle gave before
// (name, namespace, UID and PrevResourceVersion; no labels, annotations,
// spec or data):
//   - the previous event was trimmed by retention (ErrTrimmed);
//   - PrevOffset is 0: a record written before the journal recorded it
//     (schema 2 and older files: their MODIFIEDs stay metadata-only, while
//     MODIFIEDs appended after the file is opened by this build carry it),
//     or a key whose previous event carried no object or whose index
//     entry had no pointer (written by schema 1);
//   - the record found does not match (key, UID, type, resourceVersion),
//     which a correct file never gives.

import (
	"errors"

	"github.com/watchjournal/watchjournal/journal"
)

// oldObject returns the old side of the MODIFIED e for OnUpdate: the
// object of e's previous event from j (see the top of the file), else a
// metadata-only one.
func oldObject(dec *decoder, j *journal.Journal, e journal.Event) (any, error) {
	if e.PrevOffset == 0 || e.PrevResourceVersion == "" {
		return dec.metadataOnly(e, e.PrevResourceVersion)
	}
	evs, err := j.Read(e.PrevOffset, 1)
	if err != nil && !errors.Is(err, journal.ErrTrimmed) { // trimmed by retention: metadata only
		return nil, err
	}
	if len(evs) > 0 {
		p := evs[0]
		if p.Offset == e.PrevOffset && p.Key == e.Key && p.UID == e.UID && p.Type != journal.Deleted &&
			p.Object != nil && p.ResourceVersion == e.PrevResourceVersion {
			return dec.decode(p.Object)
		}
	}
	return dec.metadataOnly(e, e.PrevResourceVersion)
}
