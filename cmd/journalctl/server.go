package main

// While watch runs it holds bbolt's exclusive lock, so no other process can
// open the file, even read-only. It serves reads instead on the unix socket
// <db>.sock, with the library's server; journal/inspect documents the
// protocol and holds the client the read-only commands use.

import (
	"net/http"
	"time"

	"github.com/watchjournal/watchjournal/journal"
	"github.com/watchjournal/watchjournal/journal/inspect"
)

// server is the socket's configuration for a journal held open for
// writing.
type server struct {
	j       *journal.Journal
	loop    inspect.Loop  // nil: none
	maxWait time.Duration // longest /wait and GET /verify
	pid     int           // the process id /status reports; 0: none
}

func (s *server) handler() http.Handler {
	pid := s.pid
	if pid == 0 {
		pid = -1 // none
	}
	return inspect.Handler(s.j, s.loop, &inspect.Options{MaxWait: s.maxWait, PID: pid})
}
