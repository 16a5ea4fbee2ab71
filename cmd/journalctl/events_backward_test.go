package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

// bigObject is the size of each object in bigJournal: large, as the
// 900 KiB objects of the report.
const bigObject = 512 << 10

// bigJournal writes a closed journal of n events with objects of
// bigObject bytes: offsets 2i+1 ADDED and 2i+2 MODIFIED of key wj/cmNNN.
func bigJournal(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(tempDir(t), "j.db")
	j, err := journal.Open(path, &journal.Options{Resource: &testResource, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	blob := strings.Repeat("x", bigObject)
	for i := range n / 2 {
		key := fmt.Sprintf("wj/cm%03d", i)
		add := ev(journal.Added, key, fmt.Sprintf("u%03d", i), fmt.Sprint(2*i+1), 2*i)
		mod := ev(journal.Modified, key, fmt.Sprintf("u%03d", i), fmt.Sprint(2*i+2), 2*i+1)
		mod.PrevResourceVersion = add.ResourceVersion
		for _, e := range []*journal.Event{&add, &mod} {
			e.Object = []byte(`{"metadata":{"name":"` + key + `"},"data":{"blob":"` + blob + `"}}`)
		}
		appendEvents(t, j, mod.ResourceVersion, add, mod)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// countingSource counts what its source's Read returns: events, bytes of
// objects, and the most object bytes read between two writes of the
// output (what events holds before it prints: out resets it).
type countingSource struct {
	source
	events, bytes, sinceOut, maxHeld int
}

func (c *countingSource) Read(ctx context.Context, from uint64, limit int) ([]journal.Event, error) {
	evs, err := c.source.Read(ctx, from, limit)
	for _, e := range evs {
		c.events++
		c.bytes += len(e.Object)
		c.sinceOut += len(e.Object)
		c.maxHeld = max(c.maxHeld, c.sinceOut)
	}
	return evs, err
}

// countedOutput is the output of a counted run: each write resets the
// source's bytes read since the last write.
type countedOutput struct {
	strings.Builder
	src **countingSource
}

func (o *countedOutput) Write(p []byte) (int, error) {
	if *o.src != nil {
		(*o.src).sinceOut = 0
	}
	return o.Builder.Write(p)
}

// runCounted runs journalctl args with events' source counting its reads.
func runCounted(t *testing.T, args ...string) (stdout string, src *countingSource) {
	t.Helper()
	conf := tuned(func(c *settings) {
		c.openEventsSource = func(ctx context.Context, path string, poll time.Duration) (source, error) {
			s, err := openSourceEvery(ctx, path, poll)
			if err != nil {
				return nil, err
			}
			src = &countingSource{source: s}
			return src, nil
		}
	})
	out := &countedOutput{src: &src}
	var stderr strings.Builder
	if code := runWith(context.Background(), conf, args, out, &stderr); code != 0 || src == nil {
		t.Fatalf("journalctl %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr.String())
	}
	return out.String(), src
}

// Ensure events -n N reads the events it prints, not a page of readPage
// (with objects of 900 KiB, a page is 880 MiB read to print five): N
// without filters; with filters at most about twice the span of the N
// matches. -r holds at most about reverseBytes of events before it prints
// them. The output is what the whole journal's output ends with.
func TestEvents_Lines_ReadsWhatItPrints(t *testing.T) {
	const n = 100 // 50 MiB of objects
	path := bigJournal(t, n)
	all, _ := runCounted(t, "events", "--db", path)
	rows := strings.Split(strings.TrimSuffix(all, "\n"), "\n")
	header, rows := rows[0], rows[1:]
	if len(rows) != n {
		t.Fatalf("events printed %d rows; want %d:\n%s", len(rows), n, all)
	}
	modified, _ := runCounted(t, "events", "--db", path, "--type", "MODIFIED")
	modRows := strings.Split(strings.TrimSuffix(modified, "\n"), "\n")[1:]
	names, _ := runCounted(t, "events", "--db", path, "-o", "name")
	nameRows := strings.Split(strings.TrimSuffix(names, "\n"), "\n")
	reversed := func(rs []string) []string { r := slices.Clone(rs); slices.Reverse(r); return r }
	lines := func(rs ...[]string) string { return strings.Join(slices.Concat(rs...), "\n") + "\n" }

	for _, tc := range []struct {
		name      string
		args      []string
		want      string
		maxEvents int // events read, at most
		maxHeld   int // object bytes read before an output write, at most; 0: no bound
	}{
		{"-n 5 reads the last five", []string{"-n", "5"}, lines([]string{header}, rows[n-5:]), 5, 0},
		{"-n 3 --type MODIFIED reads about twice the span of three matches", []string{"-n", "3", "--type", "MODIFIED"},
			lines([]string{header}, modRows[len(modRows)-3:]), 3 + 6 + 6, 0},
		{"-r -n 5 reads the last five", []string{"-r", "-n", "5"}, lines([]string{header}, reversed(rows[n-5:])), 5, 0},
		{"-r reads each event once, a window of about reverseBytes at a time", []string{"-r", "-o", "name"},
			lines(reversed(nameRows)), n, reverseBytes + bigObject + 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, src := runCounted(t, slices.Concat([]string{"events", "--db", path}, tc.args)...)
			if got != tc.want {
				t.Errorf("output:\n%s\nwant:\n%s", got, tc.want)
			}
			if src.events > tc.maxEvents {
				t.Errorf("read %d events (%d MiB of objects); want at most %d", src.events, src.bytes>>20, tc.maxEvents)
			}
			if tc.maxHeld > 0 && src.maxHeld > tc.maxHeld {
				t.Errorf("read %d MiB of objects before printing them; want at most %d MiB", src.maxHeld>>20, tc.maxHeld>>20)
			}
		})
	}
}
