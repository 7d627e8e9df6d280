// Command receiver is the downstream service of the fenced-http example: it
// accepts Kira's HTTP job requests through the httpfence middleware, which
// answers 409 Conflict to a token older than one it already admitted.
//
//	go run ./examples/fenced-http -listen 127.0.0.1:8090
//	go run ./cmd/kira run --catalog examples/fenced-http/catalog.yaml
//
// /fence is the job's fence_url: Kira calls it with the new token when a member
// wins a slot, before the first /reconcile, so the fence is up before an
// ex-leader's late request can arrive.
package main

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/kira-scheduler/kira/fencing/httpfence"
)

func newMux(logf func(format string, args ...any)) http.Handler {
	guard := httpfence.New(httpfence.NewMemoryStore(), httpfence.BySlot)
	mux := http.NewServeMux()
	mux.Handle("POST /fence", guard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logf("fence raised: %s/%s token %s", r.Header.Get("Kira-Job"), r.Header.Get("Kira-Partition"), r.Header.Get("Kira-Fencing-Token"))
		w.WriteHeader(http.StatusNoContent)
	})))
	mux.Handle("POST /reconcile", guard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logf("reconcile %s/%s token %s idempotency-key %s", r.Header.Get("Kira-Job"), r.Header.Get("Kira-Partition"),
			r.Header.Get("Kira-Fencing-Token"), r.Header.Get("Idempotency-Key"))
	})))
	return mux
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8090", "listen address")
	flag.Parse()
	srv := &http.Server{Addr: *listen, Handler: newMux(log.Printf), ReadHeaderTimeout: 5 * time.Second}
	log.Printf("receiver on %s", *listen)
	log.Fatal(srv.ListenAndServe())
}
