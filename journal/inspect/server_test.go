package inspect_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// Ensure Serve without a loop serves the journal's reads on
// SocketPath(j.Path()), answers /status with 404 (no loop in this
// process), and returns nil once its context ends.
func TestServe_JournalWithoutLoop(t *testing.T) {
	j := openJournal(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- inspect.Serve(ctx, j, nil, nil) }()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", inspect.SocketPath(j.Path()))
	}}}
	get := func(path string) (int, string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := c.Get("http://socket" + path)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return resp.StatusCode, string(b)
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %v", path, err)
			}
			time.Sleep(10 * time.Millisecond) // until the socket listens
		}
	}
	if code, body := get("/stats"); code != http.StatusOK || !strings.Contains(body, `"objects":0`) {
		t.Errorf("GET /stats = %d %s; want 200 with objects 0", code, body)
	}
	if code, body := get("/status"); code != http.StatusNotFound {
		t.Errorf("GET /status without a loop = %d %s; want 404", code, body)
	}
	// An event's reason is on the wire as "reason", absent when empty.
	if err := j.Writer().Update(func(tx *journal.Tx) error {
		for _, e := range []journal.Event{
			{Type: journal.Added, Key: "wj/a", UID: "u1", ResourceVersion: "1", Origin: journal.OriginWatch},
			{Type: journal.Deleted, Key: "wj/a", UID: "u1", ResourceVersion: "2", Origin: journal.OriginWatch, Reason: journal.ReasonLeftSelector},
		} {
			if _, err := tx.Append(&e); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if code, body := get("/events?from=1"); code != http.StatusOK || strings.Count(body, `"reason":`) != 1 || !strings.Contains(body, `"reason":"left-selector"`) {
		t.Errorf("GET /events = %d %s; want 200 with one reason, left-selector", code, body)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve = %v; want nil once its context ends", err)
	}
}
