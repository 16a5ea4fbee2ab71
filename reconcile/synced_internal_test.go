package reconcile

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

// Only the server's normal end of a watch (io.EOF from the stream, after
// no ERROR frame) proves a resume served; a cut proves nothing.
func TestServedToEnd(t *testing.T) {
	resume := stateWatch{rv: "5"}
	for _, tt := range []struct {
		name  string
		batch []frame
		next  state
		want  bool
	}{
		{"the response ended normally", []frame{{err: io.EOF}}, resume, true},
		{"events, then the normal end", []frame{{ev: watchEvent{Type: "ADDED"}}, {err: io.EOF}}, resume, true},
		{"a cut mid-response", []frame{{err: io.ErrUnexpectedEOF}}, resume, false},
		{"a network error", []frame{{err: fmt.Errorf("read: %w", errors.New("connection reset by peer"))}}, resume, false},
		{"an ERROR frame (410) led to a relist", []frame{{ev: watchEvent{Type: "ERROR"}}, {err: io.EOF}}, stateList{}, false},
		{"an undecodable frame", []frame{{err: io.EOF}}, stateBackoff{next: resume}, false},
		{"the watch goes on", []frame{{ev: watchEvent{Type: "ADDED"}}}, nil, false},
	} {
		if got := servedToEnd(tt.batch, tt.next); got != tt.want {
			t.Errorf("%s: servedToEnd = %v; want %v", tt.name, got, tt.want)
		}
	}
}
