package inspect

// The socket's JSON shapes. journalctl decodes them (cmd/journalctl's
// output.go holds its copies, with the same field names): a change here is
// a change of the protocol, and journalctl's socket tests, which run
// against this server, catch a difference.

import (
	"encoding/json"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

type jsonEvent struct {
	Offset              uint64            `json:"offset"`
	Type                journal.EventType `json:"type"`
	Key                 string            `json:"key"`
	UID                 string            `json:"uid"`
	ResourceVersion     string            `json:"resourceVersion"`
	PrevResourceVersion string            `json:"prevResourceVersion,omitempty"`
	Time                time.Time         `json:"time"`
	Origin              journal.Origin    `json:"origin"`
	Reason              journal.Reason    `json:"reason,omitempty"`
	Synthesized         bool              `json:"synthesized"`
	Object              json.RawMessage   `json:"object"`
}

func toJSONEvent(e journal.Event) jsonEvent {
	return jsonEvent{
		Offset: e.Offset, Type: e.Type, Key: e.Key, UID: e.UID, ResourceVersion: e.ResourceVersion,
		PrevResourceVersion: e.PrevResourceVersion, Time: e.Time.UTC(), Origin: e.Origin,
		Reason: e.Reason, Synthesized: e.Synthesized(), Object: e.Object,
	}
}

type jsonIndexEntry struct {
	Key             string `json:"key"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
}

type jsonResource struct {
	Group         string `json:"group"`
	Version       string `json:"version"`
	Resource      string `json:"resource"`
	Namespace     string `json:"namespace,omitempty"`
	LabelSelector string `json:"labelSelector,omitempty"`
	FieldSelector string `json:"fieldSelector,omitempty"`
}

type jsonStats struct {
	Resource        jsonResource      `json:"resource"`
	Objects         uint64            `json:"objects"`
	FirstOffset     uint64            `json:"firstOffset"`
	LastOffset      uint64            `json:"lastOffset"`
	ResourceVersion string            `json:"resourceVersion"`
	FileSize        int64             `json:"fileSize"`
	JournalBytes    uint64            `json:"journalBytes"`
	Consumers       map[string]uint64 `json:"consumers"`
}

func toJSONStats(s journal.Stats) jsonStats {
	r := s.Resource
	return jsonStats{
		Resource: jsonResource{
			Group: r.GVR.Group, Version: r.GVR.Version, Resource: r.GVR.Resource,
			Namespace: r.Namespace, LabelSelector: r.LabelSelector, FieldSelector: r.FieldSelector,
		},
		Objects: s.Objects, FirstOffset: s.FirstOffset, LastOffset: s.LastOffset,
		ResourceVersion: s.ResourceVersion, FileSize: s.FileSize, JournalBytes: s.JournalBytes,
		Consumers: s.Consumers,
	}
}

// writerStatus is the writer's Status (reconcile.Status), its error as text.
// ListPages and ListObjects are the current (or last) list's progress.
type writerStatus struct {
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
	// ListMode and ListModeReason: how the writer lists, and why.
	ListMode       string `json:"listMode,omitempty"`
	ListModeReason string `json:"listModeReason,omitempty"`
	// Encoding is reconcile.Status.Encoding: protobuf or json.
	Encoding string `json:"encoding,omitempty"`
	PID      int    `json:"pid,omitempty"`

	// ShardMode is reconcile.Status.ShardMode: server or client for a
	// journal bound to a shard range, absent otherwise.
	ShardMode string `json:"shardMode,omitempty"`
}

func toWriterStatus(s Status) writerStatus {
	ws := writerStatus{
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

type jsonVerifyRequest struct {
	Head        uint64 `json:"head"`
	Verifies    int    `json:"verifies"`
	Divergences int    `json:"divergences"`
}

type jsonHead struct {
	Head uint64 `json:"head"`
}

type jsonError struct {
	Error     string         `json:"error"`
	Compacted *jsonCompacted `json:"compacted,omitempty"`
}

type jsonCompacted struct {
	Requested uint64 `json:"requested"`
	First     uint64 `json:"first"`
}

type jsonConsumer struct {
	Name      string `json:"name"`
	Committed uint64 `json:"committed"`
	Lag       uint64 `json:"lag"`
}

type jsonRetention struct {
	MaxEvents    uint64 `json:"maxEvents,omitempty"`
	MaxBytes     uint64 `json:"maxBytes,omitempty"`
	MaxAge       string `json:"maxAge,omitempty"`
	HardMaxBytes uint64 `json:"hardMaxBytes,omitempty"`
}

func toJSONRetention(r journal.Retention) jsonRetention {
	jr := jsonRetention{MaxEvents: r.MaxEvents, MaxBytes: r.MaxBytes, HardMaxBytes: r.HardMaxBytes}
	if r.MaxAge != 0 {
		jr.MaxAge = r.MaxAge.String()
	}
	return jr
}
