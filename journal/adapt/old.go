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

// previousObject returns the object of the MODIFIED e's previous event
// from j (see the top of the file), nil when there is none to give.
func previousObject(j *journal.Journal, e journal.Event) ([]byte, error) {
	if e.PrevOffset == 0 || e.PrevResourceVersion == "" {
		return nil, nil
	}
	evs, err := j.Read(e.PrevOffset, 1)
	if errors.Is(err, journal.ErrTrimmed) {
		return nil, nil // trimmed by retention
	}
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	p := evs[0]
	if p.Offset != e.PrevOffset || p.Key != e.Key || p.UID != e.UID || p.Type == journal.Deleted ||
		p.Object == nil || p.ResourceVersion != e.PrevResourceVersion {
		return nil, nil
	}
	return p.Object, nil
}
