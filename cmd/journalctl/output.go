package main

// Output: tables and JSON lines, and the JSON forms that -o json prints
// and the socket sends (one form for both).

import (
	"encoding/json"
	"errors"
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
	"sigs.k8s.io/yaml"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/reconcile"
)

// printer writes rows in one output format:
//
//   - table: the first narrow columns under a header; wide: every column.
//     A table's columns keep the widest width seen so far, never less than
//     their minimum widths, so the rows of later flushes (events -f) line
//     up with the earlier ones.
//   - json: one JSON document, an array of the rows' values, one value a
//     line ("[\n" v1 ",\n" v2 "\n]\n"); a stream (events -f) writes
//     one value a line instead (NDJSON), with no array around them.
//   - yaml: one YAML sequence of the rows' values; a stream adds items.
//   - name: the name column alone, one a line (kubectl's -o name).
//
// The header (a table's, or a JSON array's "[") is written with the first
// row or by close: an error before any row leaves the output empty.
type printer struct {
	w       io.Writer
	spec    printSpec
	started bool
	rows    int
	tw      *tabwriter.Writer
	widths  []int
}

// printSpec describes a printer: its format, the table's header and what
// the formats take from a row.
type printSpec struct {
	format string
	// stream makes json print NDJSON: a document never ends.
	stream bool
	// header names every column; a table shows the first narrow of them
	// (0: all), wide shows all.
	header []string
	narrow int
	// nameCol is the column -o name prints.
	nameCol int
	// minWidths are the minimum widths, in characters, of the table's
	// first columns (the last column is never padded).
	minWidths []int
}

// tableOrJSON are the formats of stats, verify and the default printer.
var tableOrJSON = []string{"table", "json"}

// checkOutput returns an error unless format is "table" or "json".
func checkOutput(format string) error { return checkFormat(format, tableOrJSON...) }

// checkFormat returns an error unless format is one of formats.
func checkFormat(format string, formats ...string) error {
	if !slices.Contains(formats, format) {
		return fmt.Errorf("unknown output format %q: want %s", format, orList(formats))
	}
	return nil
}

// orList returns "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// newPrinter returns a table or json printer.
func newPrinter(w io.Writer, format string, header ...string) (*printer, error) {
	if err := checkOutput(format); err != nil {
		return nil, err
	}
	return newSpecPrinter(w, printSpec{format: format, header: header}), nil
}

// newSpecPrinter returns a printer for spec, whose format the caller has
// checked.
func newSpecPrinter(w io.Writer, spec printSpec) *printer {
	p := &printer{w: w, spec: spec, widths: slices.Clone(spec.minWidths)}
	if spec.format == "table" || spec.format == "wide" {
		p.tw = newTable(w)
	}
	return p
}

// columns returns the columns the table shows of cols.
func (p *printer) columns(cols []any) []any {
	if p.spec.format == "table" && p.spec.narrow > 0 && p.spec.narrow < len(cols) {
		return cols[:p.spec.narrow]
	}
	return cols
}

// start writes the header, once.
func (p *printer) start() error {
	if p.started {
		return nil
	}
	p.started = true
	switch {
	case p.tw != nil:
		cols := make([]any, len(p.spec.header))
		for i, h := range p.spec.header {
			cols[i] = h
		}
		p.cell(p.columns(cols))
	case p.spec.format == "json" && !p.spec.stream:
		_, err := io.WriteString(p.w, "[\n")
		return err
	}
	return nil
}

// row prints v (json, yaml) or cols (table, wide, name) as one row.
func (p *printer) row(v any, cols ...any) error {
	if err := p.start(); err != nil {
		return err
	}
	p.rows++
	switch p.spec.format {
	case "json":
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		switch {
		case p.spec.stream:
			b = append(b, '\n')
		case p.rows > 1:
			b = append([]byte(",\n"), b...)
		}
		_, err = p.w.Write(b)
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = p.w.Write(yamlItem(b))
		return err
	case "name":
		_, err := fmt.Fprintln(p.w, cols[p.spec.nameCol])
		return err
	}
	p.cell(p.columns(cols))
	return nil
}

// yamlItem turns a YAML document into an item of a sequence: "- " before
// its first line, two spaces before the others.
func yamlItem(doc []byte) []byte {
	lines := strings.SplitAfter(strings.TrimSuffix(string(doc), "\n"), "\n")
	var b strings.Builder
	for i, l := range lines {
		if i == 0 {
			b.WriteString("- ")
		} else {
			b.WriteString("  ")
		}
		b.WriteString(l)
	}
	b.WriteString("\n")
	return []byte(b.String())
}

// cell writes cols as one table row.
func (p *printer) cell(cols []any) {
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
}

// flush writes out the table rows buffered so far, aligned together.
func (p *printer) flush() error {
	if p.tw == nil {
		return nil
	}
	return p.tw.Flush()
}

// close ends the output: the header when no row came, the end of a JSON
// array ("[\n]\n" when empty) or "[]" for an empty YAML sequence. A
// stream is never closed.
func (p *printer) close() error {
	if err := p.start(); err != nil {
		return err
	}
	var err error
	switch {
	case p.spec.format == "json" && !p.spec.stream:
		if p.rows > 0 {
			_, err = io.WriteString(p.w, "\n")
		}
		if err == nil {
			_, err = io.WriteString(p.w, "]\n")
		}
	case p.spec.format == "yaml" && p.rows == 0 && !p.spec.stream:
		_, err = io.WriteString(p.w, "[]\n")
	}
	return errors.Join(err, p.flush())
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0) }

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
// null for a tombstone or a metadata-only journal. reason is the event's
// journal.Reason, absent when empty (an ordinary event).
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
	Reason              journal.Reason  `json:"reason,omitempty"`
	Synthesized         bool            `json:"synthesized"`
	Object              json.RawMessage `json:"object"`
}

func toJSONEvent(e journal.Event) jsonEvent {
	return jsonEvent{
		Offset: e.Offset, Type: e.Type, Key: e.Key, UID: e.UID, ResourceVersion: e.ResourceVersion,
		PrevResourceVersion: e.PrevResourceVersion, Time: e.Time.UTC(), Origin: e.Origin,
		Reason: e.Reason, Synthesized: e.Synthesized(), Object: e.Object,
	}
}

func (je jsonEvent) event() journal.Event {
	e := journal.Event{
		Offset: je.Offset, Type: je.Type, Key: je.Key, UID: je.UID, ResourceVersion: je.ResourceVersion,
		PrevResourceVersion: je.PrevResourceVersion, Time: je.Time, Origin: je.Origin, Reason: je.Reason,
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
	// ListMode is how the watch lists ("streaming" or "paginated") and
	// ListModeReason why (reconcile.Status.ListMode).
	ListMode       reconcile.ListMode `json:"listMode,omitempty"`
	ListModeReason string             `json:"listModeReason,omitempty"`
	// Encoding is the encoding of the watch's responses, protobuf or json
	// (reconcile.Status.Encoding).
	Encoding string `json:"encoding,omitempty"`
	// PID is the watch's process id; /status sets it, 0 leaves it out.
	PID int `json:"pid,omitempty"`

	// ShardMode is reconcile.Status.ShardMode: server or client for a
	// journal bound to a shard range, absent otherwise.
	ShardMode reconcile.ShardMode `json:"shardMode,omitempty"`
}

func toWriterStatus(s reconcile.Status) writerStatus {
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

// dropManagedFields returns obj without metadata.managedFields (what
// kubectl get -o json leaves out unless --show-managed-fields), or obj
// itself when it has none or does not decode. A rewritten object's fields
// are in key order.
func dropManagedFields(obj json.RawMessage) json.RawMessage {
	if !strings.Contains(string(obj), `"managedFields"`) {
		return obj
	}
	var o, meta map[string]json.RawMessage
	if json.Unmarshal(obj, &o) != nil || json.Unmarshal(o["metadata"], &meta) != nil {
		return obj
	}
	if _, ok := meta["managedFields"]; !ok {
		return obj
	}
	delete(meta, "managedFields")
	m, err := json.Marshal(meta)
	if err != nil {
		return obj
	}
	o["metadata"] = m
	b, err := json.Marshal(o)
	if err != nil {
		return obj
	}
	return b
}

// listFormats are the -o formats of index and consumers.
var listFormats = []string{"table", "json", "yaml", "name"}
