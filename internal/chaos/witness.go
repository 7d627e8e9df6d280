package chaos

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/kira-scheduler/kira/fencing"
	"github.com/kira-scheduler/kira/fencing/httpfence"
	"github.com/kira-scheduler/kira/jobs"
)

// Kind is what an attempt at the witness was.
type Kind string

const (
	// Write is an execution's write: the work the fence protects.
	Write Kind = "write"
	// Raise is a new leader raising the fence (the job's fence_url).
	Raise Kind = "raise"
	// Begin is a command job saying it has started, before it sleeps and
	// writes; it is not fenced. The SIGSTOP test pauses a member on it, so
	// the write is in flight while the member is frozen.
	Begin Kind = "begin"
	// Hold is an HTTP job's run beginning its work at the witness (POST
	// /hold): the witness holds the request for the work's duration, then
	// takes it as the run's Write. It is the start mark of a run the
	// checker counts (judgeConcurrency); not fenced.
	Hold Kind = "hold"
	// End is a held run whose client went away before its work was done
	// (its member cancelled it, or died): the run's end mark, as its Write
	// is otherwise.
	End Kind = "end"
)

// Outcome is what the witness did with an attempt.
type Outcome string

const (
	// Accepted: the token was current and the write took effect.
	Accepted Outcome = "accepted"
	// Stale: a higher token had been admitted for the slot: 409, no effect.
	Stale Outcome = "stale"
	// Replay: the token was current but this execution id had already taken
	// effect (a retry of a fire whose first attempt reached us): 200, no
	// effect. This is what the deterministic execution id is for.
	Replay Outcome = "replay"
	// Noted: a Begin or a Hold, recorded only.
	Noted Outcome = "noted"
	// Gone: an End, the request's client gone.
	Gone Outcome = "gone"
	// Invalid: the request lacked a header the witness needs.
	Invalid Outcome = "invalid"
)

// Attempt is one request the witness received, as the checker reads it.
type Attempt struct {
	// Seq orders attempts by when the witness decided them; for one slot
	// this is the order in which the fence saw them.
	Seq         int64
	At          time.Time // witness's clock, when decided
	Kind        Kind
	Job         string
	Partition   int
	Member      string
	Token       fencing.Token
	ExecutionID string
	Scheduled   time.Time
	Outcome     Outcome
}

// Slot names the attempt's slot as job/partition.
func (a Attempt) Slot() string { return a.Job + "/" + strconv.Itoa(a.Partition) }

// Witness is a small fenced HTTP service: it is the protected resource the
// chaos suite's jobs write to. Writes and fence raises go through the HTTP
// guard (fencing/httpfence) exactly as a user's service would use it; the
// witness adds an idempotency check on the execution id and keeps a log of
// every attempt, admitted or not, for the checker.
//
//	POST /write  an execution's write (Kira's HTTP executor headers)
//	POST /fence  the job's fence_url
//	POST /begin  a command job's "started" note (unfenced)
//	POST /hold   an execution that works at the witness for ?work= (a
//	             duration), then writes as /write does; its Hold and its
//	             Write (or End) mark when it ran
type Witness struct {
	handler http.Handler
	write   http.Handler // /write's
	now     func() time.Time

	mu       sync.Mutex
	seq      int64
	attempts []Attempt
	applied  map[string]bool // execution ids that took effect
	waiters  []*waiter
}

type waiter struct {
	match func(Attempt) bool
	found chan Attempt
}

// NewWitness returns an empty witness.
func NewWitness() *Witness {
	w := &Witness{now: time.Now, applied: map[string]bool{}}
	guard := httpfence.New(httpfence.NewMemoryStore(), httpfence.BySlot)
	mux := http.NewServeMux()
	// Inside the guard: the fence admitted the token, under the slot's lock.
	w.write = w.recordRejections(Write, guard.Wrap(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		a, ok := w.parse(r, Write)
		if !ok {
			http.Error(rw, "missing headers", http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		a.Outcome = Accepted
		if w.applied[a.ExecutionID] {
			a.Outcome = Replay
		}
		w.applied[a.ExecutionID] = true
		w.appendLocked(a)
		w.mu.Unlock()
		fmt.Fprintln(rw, a.Outcome)
	})))
	mux.Handle("POST /write", w.write)
	mux.HandleFunc("POST /hold", w.hold)
	mux.Handle("POST /fence", w.recordRejections(Raise, guard.Wrap(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		a, _ := w.parse(r, Raise)
		a.Outcome = Accepted
		w.append(a)
		rw.WriteHeader(http.StatusNoContent)
	}))))
	mux.HandleFunc("POST /begin", func(rw http.ResponseWriter, r *http.Request) {
		a, _ := w.parse(r, Begin)
		a.Outcome = Noted
		w.append(a)
		rw.WriteHeader(http.StatusNoContent)
	})
	w.handler = mux
	return w
}

// hold is POST /hold: a Hold, then the work (the request held for the
// ?work= duration), then the write, unless the client goes away first (End).
// The marks are taken when the witness sees them, so a run of a frozen
// member still ends when its work is done.
func (w *Witness) hold(rw http.ResponseWriter, r *http.Request) {
	work, err := time.ParseDuration(r.URL.Query().Get("work"))
	a, ok := w.parse(r, Hold)
	if err != nil || !ok || a.ExecutionID == "" {
		a.Outcome = Invalid
		w.append(a)
		http.Error(rw, "missing headers or ?work=", http.StatusBadRequest)
		return
	}
	a.Outcome = Noted
	w.append(a)
	t := time.NewTimer(work)
	defer t.Stop()
	select {
	case <-t.C:
		w.write.ServeHTTP(rw, r)
	case <-r.Context().Done():
		a.Kind, a.Outcome = End, Gone
		w.append(a)
	}
}

// ServeHTTP implements http.Handler.
func (w *Witness) ServeHTTP(rw http.ResponseWriter, r *http.Request) { w.handler.ServeHTTP(rw, r) }

// Attempts returns a copy of the log, in decision order.
func (w *Witness) Attempts() []Attempt {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Attempt(nil), w.attempts...)
}

func (w *Witness) append(a Attempt) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.appendLocked(a)
}

func (w *Witness) appendLocked(a Attempt) {
	w.seq++
	a.Seq, a.At = w.seq, w.now()
	w.attempts = append(w.attempts, a)
	kept := w.waiters[:0]
	for _, wt := range w.waiters {
		if wt.match(a) {
			wt.found <- a
			continue
		}
		kept = append(kept, wt)
	}
	w.waiters = kept
}

// WaitFor waits up to timeout for the next attempt that match accepts, and
// returns it the moment it is decided (a fault can be injected right then).
func (w *Witness) WaitFor(timeout time.Duration, match func(Attempt) bool) (Attempt, bool) {
	wt := &waiter{match: match, found: make(chan Attempt, 1)}
	w.mu.Lock()
	w.waiters = append(w.waiters, wt)
	w.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case a := <-wt.found:
		return a, true
	case <-t.C:
		w.mu.Lock()
		defer w.mu.Unlock()
		for i, x := range w.waiters {
			if x == wt {
				w.waiters = append(w.waiters[:i], w.waiters[i+1:]...)
				break
			}
		}
		select {
		case a := <-wt.found:
			return a, true
		default:
			return Attempt{}, false
		}
	}
}

// recordRejections logs the requests the guard turned away (its 409 and 400
// answers never reach the inner handler).
func (w *Witness) recordRejections(kind Kind, next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: rw, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		switch sw.code {
		case http.StatusConflict:
			a, _ := w.parse(r, kind)
			a.Outcome = Stale
			w.append(a)
		case http.StatusBadRequest:
			a, _ := w.parse(r, kind)
			a.Outcome = Invalid
			w.append(a)
		}
	})
}

// parse reads the execution's facts from Kira's headers; ok is false if one
// that a write needs is missing or malformed.
func (w *Witness) parse(r *http.Request, kind Kind) (Attempt, bool) {
	h := r.Header
	a := Attempt{Kind: kind, Job: h.Get(jobs.HeaderJob), Member: h.Get(jobs.HeaderMember), ExecutionID: h.Get(jobs.HeaderIdempotencyKey)}
	p, errP := strconv.Atoi(h.Get(jobs.HeaderPartition))
	tok, errT := fencing.ParseToken(h.Get(fencing.HeaderToken))
	a.Partition, a.Token = p, tok
	ok := errP == nil && errT == nil && a.Job != ""
	if s := h.Get(jobs.HeaderScheduledTime); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		a.Scheduled, ok = t, ok && err == nil
	} else if kind == Write {
		ok = false
	}
	if kind == Write && a.ExecutionID == "" {
		ok = false
	}
	return a, ok
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}
