package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kira-scheduler/kira/api"
	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/etcdtest"
	"github.com/kira-scheduler/kira/internal/kiratest"
	"github.com/kira-scheduler/kira/internal/ops"
)

// The member's HTTP server, serving the API, cuts off a client that sends
// its headers and then trickles its body (answered 400, the write not
// done), one that never ends its headers, and one that holds an idle
// connection: the server closes each once its timeout passes. The
// member's own timeouts are all set, write over read.
func TestSlowClientsAreCutOff(t *testing.T) {
	if m := httpTimeouts; m.header <= 0 || m.read <= 0 || m.idle <= 0 || m.write <= m.read {
		t.Fatalf("the member's HTTP timeouts %+v: each must be set, write over read", m)
	}
	cli := etcdtest.Start(t).Client(t)
	cat, err := config.Parse("c.yaml", []byte("cluster: c\njobs:\n  - {name: tick, schedule: \"@every 1s\", command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := config.Store(context.Background(), cli, cat); err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(api.Handler(api.Config{KV: cli, Cluster: "c", Auth: api.Auth{Token: []byte("tok")}}),
		serverTimeouts{header: 300 * time.Millisecond, read: 500 * time.Millisecond, write: 5 * time.Second, idle: 300 * time.Millisecond})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	addr := l.Addr().String()

	trickled := dial(t, addr, "POST /v1/jobs/tick/pause HTTP/1.1\r\nHost: kira\r\nAuthorization: Bearer tok\r\nContent-Length: 200\r\n\r\n")
	go func() { // 200 bytes, one each 50 ms: 10 s if the server waited for all
		for range 200 {
			if _, err := trickled.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	if answer := closedByServer(t, trickled); !strings.HasPrefix(answer, "HTTP/1.1 400") || !strings.Contains(answer, "reading the body") {
		t.Fatalf("a trickled body was answered %q; want 400 reading the body", answer)
	}
	if paused, err := ops.IsPaused(context.Background(), cli, "c", "tick"); err != nil || paused {
		t.Fatalf("the trickled pause took effect (%v)", err)
	}
	closedByServer(t, dial(t, addr, "GET /v1/status HTTP/1.1\r\nHost: kira\r\n"))
	idle := dial(t, addr, "GET /v1/status HTTP/1.1\r\nHost: kira\r\n\r\n")
	if answer := closedByServer(t, idle); !strings.HasPrefix(answer, "HTTP/1.1 200") {
		t.Fatalf("GET /v1/status, then idle: %q", answer)
	}
}

// dial opens a connection to addr and sends it data.
func dial(t *testing.T, addr, data string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, data); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedByServer reads c until the server closes it and returns what it
// answered; it fails t if c is still open after 20 s.
func closedByServer(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	data, err := io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server still holds the connection after 20 s; it answered %q", data)
	}
	return string(data)
}

// With --http-read-auth, /metrics needs the token as the API's reads do,
// and the member reads its peers' /metrics for GET /v1/health with it: the
// banner names no member unread.
func TestMetricsNeedTheReadAuth(t *testing.T) {
	etcd := etcdtest.Start(t)
	dir := t.TempDir()
	catalog, tokenFile := filepath.Join(dir, "c.yaml"), filepath.Join(dir, "token")
	os.WriteFile(catalog, []byte("cluster: web\njobs:\n  - {name: a, schedule: \"@every 1s\", command: [\"true\"]}\n"), 0o600)
	os.WriteFile(tokenFile, []byte("tok-metrics\n"), 0o600)
	addr := freePort(t)
	start(t, "run", "--catalog", catalog, "--etcd", etcd.Endpoints()[0], "--http", addr, "--http-token-file", tokenFile, "--http-read-auth")
	base := "http://" + addr
	getWith := func(path, token string) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	kiratest.WaitUntil(t, "the member leading a's slot, as its /metrics read with the token say", 30*time.Second, func() bool {
		code, body := getWith("/metrics", "tok-metrics")
		return code == 200 && strings.Contains(body, `kira_slot_leader{kira_job="a",partition="0"} 1`)
	})
	if code, body := getWith("/metrics", ""); code != http.StatusUnauthorized || !strings.Contains(body, `"error"`) {
		t.Fatalf("/metrics without the token: %d %s; want 401", code, body)
	}
	var problems []ops.Problem
	kiratest.WaitUntil(t, "a healthy banner read with the token", 30*time.Second, func() bool {
		code, body := getWith("/v1/health", "tok-metrics")
		problems = nil
		return code == 200 && json.Unmarshal([]byte(body), &problems) == nil && len(problems) == 0
	})
}
