package api

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/internal/kiratest"
)

// Reads without credentials beyond maxAnonymousReads in flight are answered
// 429 at once; a read with the token still goes through, and once the
// reads in flight end, an anonymous one does again.
func TestAnonymousReadsAreBounded(t *testing.T) {
	s := &server{cfg: Config{Auth: Auth{Token: []byte("tok")}}, anonymous: make(chan struct{}, maxAnonymousReads)}
	entered, release := make(chan struct{}, maxAnonymousReads), make(chan struct{})
	srv := httptest.NewServer(s.boundAnonymous(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusOK)
	})))
	defer srv.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	for range maxAnonymousReads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := http.Get(srv.URL + "/hold"); err == nil {
				resp.Body.Close()
			}
		}()
	}
	for range maxAnonymousReads {
		kiratest.Receive(t, entered, 10*time.Second, "an anonymous read in flight")
	}
	get := func(token string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+"/quick", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	if code, retry := get(""); code != http.StatusTooManyRequests || retry == "" {
		t.Fatalf("an anonymous read past the bound: %d, Retry-After %q; want 429 with Retry-After", code, retry)
	}
	if code, _ := get("tok"); code != http.StatusOK {
		t.Fatalf("a read with the token past the bound: %d; want 200", code)
	}
	close(release)
	wg.Wait()
	if code, _ := get(""); code != http.StatusOK {
		t.Fatalf("an anonymous read once the others ended: %d; want 200", code)
	}
}
