package main

import (
	"net/http"
	"time"
)

// serverTimeouts bound how long one client may hold a connection of the
// member's HTTP server: to send its headers (header), its whole request
// with the body (read), to be answered once its headers are in (write),
// and between two requests (idle).
type serverTimeouts struct {
	header, read, write, idle time.Duration
}

// httpTimeouts are the member's. No route streams (every answer is one
// JSON or HTML body), so write bounds every answer: it is over read plus
// the API's 10 s of etcd work a request, so a client that sends a 16 MiB
// catalog within read is still answered.
var httpTimeouts = serverTimeouts{header: 5 * time.Second, read: 30 * time.Second, write: 45 * time.Second, idle: 60 * time.Second}

// maxHeaderBytes bounds a request's headers.
const maxHeaderBytes = 64 << 10

// newHTTPServer is the member's HTTP server of h: a client that trickles
// its headers or body, or holds an idle connection, is cut off once the
// timeout passes (TestSlowClientsAreCutOff).
func newHTTPServer(h http.Handler, t serverTimeouts) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.header, ReadTimeout: t.read, WriteTimeout: t.write, IdleTimeout: t.idle, MaxHeaderBytes: maxHeaderBytes}
}
