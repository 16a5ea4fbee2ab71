package main

// Output: tables and JSON lines. -o json prints the socket's JSON forms
// (journal/inspect's wire types), one form for both.

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
	"github.com/watchjournal/watchjournal/journal/inspect"
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

// tableOrJSON are the formats of stats and check.
var tableOrJSON = []string{"table", "json"}

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
		// An item of a sequence: "- " before the document's first line,
		// two spaces before the others.
		_, err = io.WriteString(p.w, "- "+strings.ReplaceAll(strings.TrimSuffix(string(b), "\n"), "\n", "\n  ")+"\n")
		return err
	case "name":
		_, err := fmt.Fprintln(p.w, cols[p.spec.nameCol])
		return err
	}
	p.cell(p.columns(cols))
	return nil
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

// jsonStats is stats -o json: the socket's /stats (inspect.Stats) with
// the consumers' lag, the retention and, when a watch runs, the writer's
// status. Lag maps each consumer's name to the events after its committed
// offset up to the head.
type jsonStats struct {
	inspect.Stats
	Lag       map[string]uint64  `json:"lag,omitempty"`
	Retention *inspect.Retention `json:"retention,omitempty"`
	Writer    *inspect.Status    `json:"writer,omitempty"`
}

// jsonCheckReport is a journal.CheckReport as check -o json prints it.
// Problems is empty, never null, for a sound file.
type jsonCheckReport struct {
	Events   uint64   `json:"events"`
	Objects  uint64   `json:"objects"`
	Replayed bool     `json:"replayed"`
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
	// SealedKeys counts the sealed objects per sealing key ID
	// (journal.Settings.SealKeyUse); absent when the file holds none.
	SealedKeys map[string]uint64 `json:"sealedKeys,omitempty"`
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
