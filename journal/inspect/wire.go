package inspect

// The socket's JSON shapes, written once: the server (server.go) encodes
// them, the client (client.go) decodes them, and journalctl prints the same
// forms for -o json. A change here is a change of the protocol.

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

// Event is a journal.Event as JSON (GET /events). Object is the object in
// JSON (journal.ObjectJSON: as stored, or converted from the Kubernetes
// protobuf the journal stores for built-in kinds), or null for a tombstone
// or a metadata-only journal; ObjectError says why it is null when the
// stored object did not convert (journal.ErrBadObject). Reason is the
// event's journal.Reason, absent when empty (an ordinary event).
type Event struct {
	Offset          uint64            `json:"offset"`
	Type            journal.EventType `json:"type"`
	Key             string            `json:"key"`
	UID             string            `json:"uid"`
	ResourceVersion string            `json:"resourceVersion"`
	// PrevResourceVersion is set for MODIFIED only.
	PrevResourceVersion string          `json:"prevResourceVersion,omitempty"`
	Time                time.Time       `json:"time"`
	Origin              journal.Origin  `json:"origin"`
	Reason              journal.Reason  `json:"reason,omitempty"`
	Synthesized         bool            `json:"synthesized"`
	Object              json.RawMessage `json:"object"`
	ObjectError         string          `json:"objectError,omitempty"`
}

// NewEvent returns e as JSON, its time in UTC and its object in JSON
// (journal.ObjectJSON).
func NewEvent(e journal.Event) Event {
	je := Event{
		Offset: e.Offset, Type: e.Type, Key: e.Key, UID: e.UID, ResourceVersion: e.ResourceVersion,
		PrevResourceVersion: e.PrevResourceVersion, Time: e.Time.UTC(), Origin: e.Origin,
		Reason: e.Reason, Synthesized: e.Synthesized(),
	}
	obj, err := journal.ObjectJSON(e.Object)
	if err != nil {
		je.ObjectError = err.Error()
	} else {
		je.Object = obj
	}
	return je
}

// event returns je as a journal.Event: a null object becomes none.
func (je Event) event() journal.Event {
	e := journal.Event{
		Offset: je.Offset, Type: je.Type, Key: je.Key, UID: je.UID, ResourceVersion: je.ResourceVersion,
		PrevResourceVersion: je.PrevResourceVersion, Time: je.Time, Origin: je.Origin, Reason: je.Reason,
	}
	if len(je.Object) > 0 && string(je.Object) != "null" {
		e.Object = je.Object
	}
	return e
}

// IndexEntry is a journal.IndexEntry as JSON (GET /index); the two convert
// into each other.
type IndexEntry struct {
	Key             string `json:"key"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
}

// Resource is a journal.Resource as JSON, its GVR flattened.
type Resource struct {
	Group         string `json:"group"`
	Version       string `json:"version"`
	Resource      string `json:"resource"`
	Namespace     string `json:"namespace,omitempty"`
	LabelSelector string `json:"labelSelector,omitempty"`
	FieldSelector string `json:"fieldSelector,omitempty"`
}

// Stats is a journal.Stats as JSON (GET /stats).
type Stats struct {
	Resource        Resource          `json:"resource"`
	Objects         uint64            `json:"objects"`
	FirstOffset     uint64            `json:"firstOffset"`
	LastOffset      uint64            `json:"lastOffset"`
	ResourceVersion string            `json:"resourceVersion"`
	FileSize        int64             `json:"fileSize"`
	JournalBytes    uint64            `json:"journalBytes"`
	Consumers       map[string]uint64 `json:"consumers"`
}

// NewStats returns s as JSON.
func NewStats(s journal.Stats) Stats {
	r := s.Resource
	return Stats{
		Resource: Resource{
			Group: r.GVR.Group, Version: r.GVR.Version, Resource: r.GVR.Resource,
			Namespace: r.Namespace, LabelSelector: r.LabelSelector, FieldSelector: r.FieldSelector,
		},
		Objects: s.Objects, FirstOffset: s.FirstOffset, LastOffset: s.LastOffset,
		ResourceVersion: s.ResourceVersion, FileSize: s.FileSize, JournalBytes: s.JournalBytes,
		Consumers: s.Consumers,
	}
}

func (js Stats) stats() journal.Stats {
	r := js.Resource
	s := journal.Stats{
		Objects: js.Objects, FirstOffset: js.FirstOffset, LastOffset: js.LastOffset,
		ResourceVersion: js.ResourceVersion, FileSize: js.FileSize, JournalBytes: js.JournalBytes,
		Consumers: js.Consumers,
	}
	s.Resource.GVR.Group, s.Resource.GVR.Version, s.Resource.GVR.Resource = r.Group, r.Version, r.Resource
	s.Resource.Namespace, s.Resource.LabelSelector, s.Resource.FieldSelector = r.Namespace, r.LabelSelector, r.FieldSelector
	return s
}

// Status is the writer's LoopStatus as JSON (GET /status, GET /verify):
// its fields, LastError as text, and the writer's PID, which /status sets
// (0 leaves it out).
type Status struct {
	Phase           string `json:"phase"`
	ResourceVersion string `json:"resourceVersion"`
	Synced          bool   `json:"synced"`
	LastError       string `json:"lastError,omitempty"`
	Lists           int    `json:"lists"`
	Watches         int    `json:"watches"`
	Gone            int    `json:"gone"`
	ListRestarts    int    `json:"listRestarts"`
	IdleRestarts    int    `json:"idleRestarts"`
	Events          int    `json:"events"`
	Verifies        int    `json:"verifies"`
	Divergences     int    `json:"divergences"`
	ListPages       int    `json:"listPages"`
	ListObjects     int    `json:"listObjects"`
	ListMode        string `json:"listMode,omitempty"`
	ListModeReason  string `json:"listModeReason,omitempty"`
	Encoding        string `json:"encoding,omitempty"`
	PID             int    `json:"pid,omitempty"`
	ShardMode       string `json:"shardMode,omitempty"`
}

func toStatus(s LoopStatus) Status {
	ws := Status{
		Phase: s.Phase, ResourceVersion: s.ResourceVersion, Synced: s.Synced,
		Lists: s.Lists, Watches: s.Watches, Gone: s.Gone, ListRestarts: s.ListRestarts,
		IdleRestarts: s.IdleRestarts, Events: s.Events, Verifies: s.Verifies, Divergences: s.Divergences,
		ListPages: s.ListPages, ListObjects: s.ListObjects, ShardMode: s.ShardMode,
		ListMode: s.ListMode, ListModeReason: s.ListModeReason, Encoding: s.Encoding,
	}
	if s.LastError != nil {
		ws.LastError = s.LastError.Error()
	}
	return ws
}

// VerifyRequest answers POST /verify: the head and the loop's counters
// read before the request.
type VerifyRequest struct {
	Head        uint64 `json:"head"`
	Verifies    int    `json:"verifies"`
	Divergences int    `json:"divergences"`
}

// jsonHead answers /head and /wait.
type jsonHead struct {
	Head uint64 `json:"head"`
}

// jsonError is the socket's error answer. Compacted is set, with HTTP 410,
// when the error is a *journal.TrimmedError.
type jsonError struct {
	Error     string         `json:"error"`
	Compacted *jsonCompacted `json:"compacted,omitempty"`
}

// jsonCompacted is a journal.TrimmedError as JSON.
type jsonCompacted struct {
	Requested uint64 `json:"requested"`
	First     uint64 `json:"first"`
}

// Consumer is a journal.ConsumerInfo as JSON (GET /consumers); the two
// convert into each other.
type Consumer struct {
	Name      string `json:"name"`
	Committed uint64 `json:"committed"`
	Lag       uint64 `json:"lag"`
}

// Retention is a journal.Retention as JSON (GET /retention): sizes in
// bytes, MaxAge as a Go duration ("24h0m0s"); a field without a limit is
// left out.
type Retention struct {
	MaxEvents    uint64 `json:"maxEvents,omitempty"`
	MaxBytes     uint64 `json:"maxBytes,omitempty"`
	MaxAge       string `json:"maxAge,omitempty"`
	HardMaxBytes uint64 `json:"hardMaxBytes,omitempty"`
}

// NewRetention returns r as JSON.
func NewRetention(r journal.Retention) Retention {
	jr := Retention{MaxEvents: r.MaxEvents, MaxBytes: r.MaxBytes, HardMaxBytes: r.HardMaxBytes}
	if r.MaxAge != 0 {
		jr.MaxAge = r.MaxAge.String()
	}
	return jr
}

// retention returns jr as a journal.Retention; a bad maxAge is an error.
func (jr Retention) retention() (journal.Retention, error) {
	r := journal.Retention{MaxEvents: jr.MaxEvents, MaxBytes: jr.MaxBytes, HardMaxBytes: jr.HardMaxBytes}
	if jr.MaxAge != "" {
		age, err := time.ParseDuration(jr.MaxAge)
		if err != nil {
			return r, fmt.Errorf("retention: bad maxAge %q", jr.MaxAge)
		}
		r.MaxAge = age
	}
	return r, nil
}

// convert maps each element of s through f (between the wire shapes and
// the journal's); a nil s gives an empty slice, which encodes as [].
func convert[S, D any](s []S, f func(S) D) []D {
	d := make([]D, len(s))
	for i, v := range s {
		d[i] = f(v)
	}
	return d
}
