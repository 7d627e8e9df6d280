package etcdclient

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Settings that cannot work are refused with the flag to fix, before any
// connection: TLS that an http:// endpoint would silently skip, half a
// key pair, a user without a password.
func TestClientConfigRefusesWhatCannotWork(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("s3cret\nignored\n"), 0o600)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" means accepted
	}{
		{"no endpoints", Config{}, "no endpoints"},
		{"plain", Config{Endpoints: []string{"http://127.0.0.1:2379"}}, ""},
		{"cert without key", Config{Endpoints: []string{"https://e:2379"}, Cert: "c.pem"}, "--cert and --key"},
		{"TLS to http", Config{Endpoints: []string{"http://e:2379"}, CACert: "ca.pem"}, "is not https://"},
		{"missing CA file", Config{Endpoints: []string{"https://e:2379"}, CACert: filepath.Join(dir, "nope.pem")}, "--cacert"},
		{"user without password", Config{Endpoints: []string{"http://e:2379"}, User: "kira"}, "has no password"},
		{"password without user", Config{Endpoints: []string{"http://e:2379"}, Password: "x"}, "without --user"},
		{"empty user name", Config{Endpoints: []string{"http://e:2379"}, User: ":x"}, "no user name"},
		{"missing password file", Config{Endpoints: []string{"http://e:2379"}, User: "kira", PasswordFile: filepath.Join(dir, "nope")}, "--password-file"},
	} {
		_, err := tc.cfg.ClientConfig()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	cfg, err := Config{Endpoints: []string{"http://e:2379"}, User: "kira", PasswordFile: pw}.ClientConfig()
	if err != nil || cfg.Username != "kira" || cfg.Password != "s3cret" {
		t.Fatalf("password file: %q %q %v", cfg.Username, cfg.Password, err)
	}
	cfg, err = Config{Endpoints: []string{"http://e:2379"}, User: "kira:in:line"}.ClientConfig()
	if err != nil || cfg.Username != "kira" || cfg.Password != "in:line" {
		t.Fatalf("inline password: %q %q %v", cfg.Username, cfg.Password, err)
	}
}

// A child process gets the settings on its command line, and the password
// only in its environment.
func TestArgsKeepThePasswordOffTheCommandLine(t *testing.T) {
	c := Config{Endpoints: []string{"https://a:2379", "https://b:2379"}, CACert: "ca.pem", User: "kira:s3cret"}
	args, env := c.Args(), c.Env()
	if strings.Contains(strings.Join(args, " "), "s3cret") {
		t.Fatalf("password on the command line: %v", args)
	}
	if !slices.Equal(args, []string{"--etcd", "https://a:2379,https://b:2379", "--cacert", "ca.pem", "--user", "kira"}) {
		t.Fatalf("args %v", args)
	}
	if !slices.Equal(env, []string{EnvPassword + "=s3cret"}) {
		t.Fatalf("env %v", env)
	}
}
