package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestReceiverRejectsLateExLeader(t *testing.T) {
	srv := httptest.NewServer(newMux(t.Logf))
	defer srv.Close()
	call := func(path, token string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, nil)
		req.Header.Set("Kira-Job", "reconcile")
		req.Header.Set("Kira-Partition", "1")
		req.Header.Set("Kira-Fencing-Token", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	steps := []struct {
		path, token string
		want        int
	}{
		{"/reconcile", "10", 200}, // old leader
		{"/fence", "25", 204},     // new leader raises on acquire
		{"/reconcile", "10", 409}, // old leader wakes up: fenced
		{"/reconcile", "25", 200}, // new leader's first run
	}
	for _, s := range steps {
		if got := call(s.path, s.token); got != s.want {
			t.Fatalf("%s with token %s: %d; want %d", s.path, s.token, got, s.want)
		}
	}
}
