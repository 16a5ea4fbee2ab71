package main

// Output: tables and JSON lines, and the JSON forms that -o json prints
// and the socket sends (one form for both).

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// printer writes rows as a table under a header, or values as JSON lines.
// A table's columns keep the widest width seen so far, never less than
// their minimum widths, so the rows of later flushes (events -f) line up
// with the earlier ones: a column moves only when a cell is wider than all
// before it and than its minimum.
type printer struct {
	tw     *tabwriter.Writer // nil for JSON
	enc    *json.Encoder
	widths []int
}

// checkOutput returns an error unless format is "table" or "json".
func checkOutput(format string) error {
	if format != "table" && format != "json" {
		return fmt.Errorf("unknown output format %q: want table or json", format)
	}
	return nil
}

// newPrinter returns a printer for format "table" or "json".
func newPrinter(w io.Writer, format string, header ...string) (*printer, error) {
	return newPrinterWidths(w, format, nil, header...)
}

// newPrinterWidths is newPrinter with minimum widths, in characters, for
// the table's first columns (the last column is never padded).
func newPrinterWidths(w io.Writer, format string, minWidths []int, header ...string) (*printer, error) {
	if err := checkOutput(format); err != nil {
		return nil, err
	}
	if format == "json" {
		return &printer{enc: json.NewEncoder(w)}, nil
	}
	p := &printer{tw: newTable(w), widths: slices.Clone(minWidths)}
	cols := make([]any, len(header))
	for i, h := range header {
		cols[i] = h
	}
	return p, p.row(nil, cols...)
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0) }

// row prints v as one JSON line, or cols as one table row.
func (p *printer) row(v any, cols ...any) error {
	if p.enc != nil {
		return p.enc.Encode(v)
	}
	for i, c := range cols {
		cell := fmt.Sprint(c)
		if i == len(cols)-1 {
			fmt.Fprintln(p.tw, cell)
			break
		}
		if i == len(p.widths) {
			p.widths = append(p.widths, 0)
		}
		n := utf8.RuneCountInString(cell)
		p.widths[i] = max(p.widths[i], n)
		fmt.Fprint(p.tw, cell, strings.Repeat(" ", p.widths[i]-n), "\t")
	}
	return nil
}

// flush writes out the table rows buffered so far, aligned together.
func (p *printer) flush() error {
	if p.tw == nil {
		return nil
	}
	return p.tw.Flush()
}

// tableTime is the TIME column: RFC 3339 with milliseconds, UTC.
func tableTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// orDash returns s, or "-" when s is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// jsonEvent is a journal.Event as JSON. Object is the object as stored, or
// null for a tombstone or a metadata-only journal.
type jsonEvent struct {
	Offset          uint64            `json:"offset"`
	Type            journal.EventType `json:"type"`
	Key             string            `json:"key"`
	UID             string            `json:"uid"`
	ResourceVersion string            `json:"resourceVersion"`
	// PrevResourceVersion is set for MODIFIED only.
	PrevResourceVersion string          `json:"prevResourceVersion,omitempty"`
	Time                time.Time       `json:"time"`
	Origin              journal.Origin  `json:"origin"`
	Synthesized         bool            `json:"synthesized"`
	Object              json.RawMessage `json:"object"`
}

func toJSONEvent(e journal.Event) jsonEvent {
	return jsonEvent{
		Offset: e.Offset, Type: e.Type, Key: e.Key, UID: e.UID, ResourceVersion: e.ResourceVersion,
		PrevResourceVersion: e.PrevResourceVersion, Time: e.Time.UTC(), Origin: e.Origin,
		Synthesized: e.Synthesized(), Object: e.Object,
	}
}

func (je jsonEvent) event() journal.Event {
	e := journal.Event{
		Offset: je.Offset, Type: je.Type, Key: je.Key, UID: je.UID, ResourceVersion: je.ResourceVersion,
		PrevResourceVersion: je.PrevResourceVersion, Time: je.Time, Origin: je.Origin,
	}
	if len(je.Object) > 0 && string(je.Object) != "null" {
		e.Object = je.Object
	}
	return e
}

// jsonIndexEntry is a journal.IndexEntry as JSON.
type jsonIndexEntry struct {
	Key             string `json:"key"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
}

// jsonResource is a journal.Resource as JSON, its GVR flattened.
type jsonResource struct {
	Group         string `json:"group"`
	Version       string `json:"version"`
	Resource      string `json:"resource"`
	Namespace     string `json:"namespace,omitempty"`
	LabelSelector string `json:"labelSelector,omitempty"`
	FieldSelector string `json:"fieldSelector,omitempty"`
}

// jsonStats is a journal.Stats as JSON; stats -o json adds the consumers'
// lag, the retention and, when a watch runs, the writer's status.
type jsonStats struct {
	Resource        jsonResource      `json:"resource"`
	Objects         uint64            `json:"objects"`
	FirstOffset     uint64            `json:"firstOffset"`
	LastOffset      uint64            `json:"lastOffset"`
	ResourceVersion string            `json:"resourceVersion"`
	FileSize        int64             `json:"fileSize"`
	JournalBytes    uint64            `json:"journalBytes"`
	Consumers       map[string]uint64 `json:"consumers"`
	// Lag and Retention are set by stats -o json, not by the socket's
	// /stats: Lag maps each consumer's name to the events after its
	// committed offset up to the head.
	Lag       map[string]uint64 `json:"lag,omitempty"`
	Retention *jsonRetention    `json:"retention,omitempty"`
	Writer    *writerStatus     `json:"writer,omitempty"`
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

func (js jsonStats) stats() journal.Stats {
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

// writerStatus is a running watch's reconcile.Status, its error as text.
type writerStatus struct {
	Phase           reconcile.Phase `json:"phase"`
	ResourceVersion string          `json:"resourceVersion"`
	Synced          bool            `json:"synced"`
	LastError       string          `json:"lastError,omitempty"`
	Lists           int             `json:"lists"`
	Watches         int             `json:"watches"`
	Gone            int             `json:"gone"`
	ListRestarts    int             `json:"listRestarts"`
	IdleRestarts    int             `json:"idleRestarts"`
	Events          int             `json:"events"`
	Verifies        int             `json:"verifies"`
	Divergences     int             `json:"divergences"`
	// ListPages and ListObjects are the progress of the current list (of
	// the last one outside phase Listing): pages and objects received.
	ListPages   int `json:"listPages"`
	ListObjects int `json:"listObjects"`
	// PID is the watch's process id; /status sets it, 0 leaves it out.
	PID int `json:"pid,omitempty"`
}

func toWriterStatus(s reconcile.Status) writerStatus {
	ws := writerStatus{
		Phase: s.Phase, ResourceVersion: s.ResourceVersion, Synced: s.Synced,
		Lists: s.Lists, Watches: s.Watches, Gone: s.Gone, ListRestarts: s.ListRestarts,
		IdleRestarts: s.IdleRestarts, Events: s.Events, Verifies: s.Verifies, Divergences: s.Divergences,
		ListPages: s.ListPages, ListObjects: s.ListObjects,
	}
	if s.LastError != nil {
		ws.LastError = s.LastError.Error()
	}
	return ws
}

// jsonVerifyRequest answers POST /verify: the head and the loop's counters
// read before the request.
type jsonVerifyRequest struct {
	Head        uint64 `json:"head"`
	Verifies    int    `json:"verifies"`
	Divergences int    `json:"divergences"`
}

// jsonVerifyReport is a journal.VerifyReport as verify -o json prints it.
// Problems is empty, never null, for a sound file.
type jsonVerifyReport struct {
	Events   uint64   `json:"events"`
	Objects  uint64   `json:"objects"`
	Replayed bool     `json:"replayed"`
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
}

func toJSONVerifyReport(r journal.VerifyReport) jsonVerifyReport {
	return jsonVerifyReport{
		Events: r.Events, Objects: r.Objects, Replayed: r.Replayed, OK: r.OK(),
		Problems: append([]string{}, r.Problems...),
	}
}

// jsonHead answers /head and /wait.
type jsonHead struct {
	Head uint64 `json:"head"`
}

// jsonError is the socket's error answer. Compacted is set, with HTTP 410,
// when the error is a *journal.CompactedError.
type jsonError struct {
	Error     string         `json:"error"`
	Compacted *jsonCompacted `json:"compacted,omitempty"`
}

// jsonCompacted is a journal.CompactedError as JSON.
type jsonCompacted struct {
	Requested uint64 `json:"requested"`
	First     uint64 `json:"first"`
}

// jsonConsumer is a journal.ConsumerInfo as JSON.
type jsonConsumer struct {
	Name      string `json:"name"`
	Committed uint64 `json:"committed"`
	Lag       uint64 `json:"lag"`
}

// jsonRetention is a journal.Retention as JSON: sizes in bytes, MaxAge as
// a Go duration ("24h0m0s"); a field without a limit is left out.
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

func (jr jsonRetention) retention() (journal.Retention, error) {
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

// formatRetention returns r as stats shows it: "events 10000, bytes 64Mi,
// age 24h0m0s, hard bytes 1Gi" with the limits that are set, or "none".
func formatRetention(r journal.Retention) string {
	var parts []string
	if r.MaxEvents > 0 {
		parts = append(parts, fmt.Sprintf("events %d", r.MaxEvents))
	}
	if r.MaxBytes > 0 {
		parts = append(parts, "bytes "+formatSize(r.MaxBytes))
	}
	if r.MaxAge > 0 {
		parts = append(parts, "age "+r.MaxAge.String())
	}
	if r.HardMaxBytes > 0 {
		parts = append(parts, "hard bytes "+formatSize(r.HardMaxBytes))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// formatSize returns n bytes as a binary-suffixed quantity when n is a
// multiple of 1024 (64Mi, 1Gi, 1536Ki), else as plain bytes: forms that
// parseSize accepts.
func formatSize(n uint64) string {
	if n == 0 || n%1024 != 0 || n > math.MaxInt64 {
		return strconv.FormatUint(n, 10)
	}
	return resource.NewQuantity(int64(n), resource.BinarySI).String()
}

// parseSize parses a --retain-*-bytes value: plain bytes (67108864) or a
// Kubernetes quantity (64Mi, 1Gi, 500M) that is a whole number of bytes.
func parseSize(flag, s string) (uint64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("--%s %q: want bytes or a quantity like 64Mi or 1Gi", flag, s)
	}
	// Value rounds up, and wraps past int64: equal means whole and in range.
	n := q.Value()
	if n < 0 || q.Cmp(*resource.NewQuantity(n, resource.BinarySI)) != 0 {
		return 0, fmt.Errorf("--%s %q: want a whole, non-negative number of bytes", flag, s)
	}
	return uint64(n), nil
}
