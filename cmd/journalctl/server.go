package main

// While watch runs it holds bbolt's exclusive lock, so no other process can
// open the file, even read-only. It serves reads instead on the unix socket
// <db>.sock, with the library's server (journal/inspect, which documents
// the protocol); sockSource (source.go) is the client.

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// watchLoop is what the socket asks of the reconcile loop that writes the
// journal: a *reconcile.Loop, faked in tests.
type watchLoop = inspect.Loop

// server is the socket's configuration for a journal held open for
// writing.
type server struct {
	j       *journal.Journal
	loop    watchLoop
	maxWait time.Duration // longest /wait and GET /verify
	pid     int           // the process id /status reports; 0: none
}

func (s *server) handler() http.Handler {
	pid := s.pid
	if pid == 0 {
		pid = -1 // none
	}
	mux := http.NewServeMux()
	mux.Handle("/", inspect.Handler(s.j, s.loop, &inspect.Options{MaxWait: s.maxWait, PID: pid}))
	// The CLI's consumer changes (consumers_change.go); an embedding
	// program's inspect.Serve does not take them.
	mux.HandleFunc("POST /consumers/{name}/change", s.changeConsumer)
	return mux
}

// serve serves h on the unix socket sock until stop (inspect.Listen).
func serve(sock string, h http.Handler, log *zap.Logger) (stop func(), err error) {
	return inspect.Listen(sock, h, log)
}
