package api

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// secretA and secretB are the secrets of the tests' tokens: long enough.
const (
	secretA = "s3cret-a-0123456789abcdef"
	secretB = "s3cret-b-0123456789abcdef"
)

// writeCredentials writes yaml as a credentials file, beside a file
// "a.token" that holds secretA, and returns its path.
func writeCredentials(t *testing.T, yaml string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.token"), []byte(secretA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "credentials.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// A good file gives each token its secret (from a file relative to the
// credentials file, or from the environment) and its scope.
func TestCredentialsFile(t *testing.T) {
	t.Setenv("KIRA_TEST_SECRET_B", secretB)
	c, err := LoadCredentials(writeCredentials(t, `
unlisted_certificates: refused
tokens:
  - name: customers
    secret_file: a.token
    scope: {jobs: [customer-*], verbs: [trigger, pause]}
  - name: admin
    secret_env: KIRA_TEST_SECRET_B
certificates:
  - subject: CN=deployer,O=Acme
    scope: {labels: {team: growth}}
  - subject: CN=root
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.tokens) != 2 || string(c.tokens[0].secret) != secretA || string(c.tokens[1].secret) != secretB || !c.refuseUnlisted {
		t.Fatalf("credentials %+v", c)
	}
	if s := c.tokens[0].scope; s == nil || s.jobs[0] != "customer-*" || len(s.verbs) != 2 || c.tokens[1].scope != nil {
		t.Fatalf("scopes %+v %+v", c.tokens[0].scope, c.tokens[1].scope)
	}
	if s, ok := c.certs["CN=deployer,O=Acme"]; !ok || s.labels["team"] != "growth" {
		t.Fatalf("certificates %+v", c.certs)
	}
	if s, ok := c.certs["CN=root"]; !ok || s != nil {
		t.Fatalf("certificates %+v", c.certs)
	}
	var log bytes.Buffer
	slog.New(slog.NewTextHandler(&log, nil)).Info("loaded", "credentials", c, "value", *c)
	for _, shown := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", *c), fmt.Sprintf("%#v", c), log.String()} {
		if strings.Contains(shown, secretA) || strings.Contains(shown, secretB) || !strings.Contains(shown, "tokens [customers admin], 2 certificates") {
			t.Errorf("credentials shown as %s", shown)
		}
	}
}

// Every problem of a credentials file is an error naming the file, the
// line and column and the field; a secret, even one too short or a
// duplicate, is never in it.
func TestCredentialsFileErrors(t *testing.T) {
	t.Setenv("KIRA_TEST_SECRET_A", secretA)
	t.Setenv("KIRA_TEST_SHORT", "short-secret")
	for _, tc := range []struct{ yaml, want string }{
		{"tokens:\n  - name: a\n    secret_file: a.token\n    secret: x\n", `:4:5: unknown field "secret"`},
		{"tokens:\n  - name: a\n    secret_file: a.token\n    scope: {verbs: [trigger, delete]}\n", ":4:30: tokens[0].scope.verbs[1]: \"delete\": want write"},
		{"tokens:\n  - name: a\n    secret_file: a.token\n    scope: {jobs: [\"cust*omer\"]}\n", ":4:20: tokens[0].scope.jobs[0]: \"cust*omer\": want a job name"},
		{"tokens:\n  - name: a\n    secret_file: a.token\n    scope: {labels: {team: \"a b\"}}\n", ":4:28: tokens[0].scope.labels.team: team=\"a b\""},
		{"tokens:\n  - name: a\n    secret_file: a.token\n    scope: {}\n", ":4:12: tokens[0].scope: an empty scope limits nothing"},
		{"tokens:\n  - name: a\n    secret_file: nope.token\n", ":3:18: tokens[0].secret_file: open "},
		{"tokens:\n  - name: a\n    secret_env: KIRA_TEST_UNSET\n", ":3:17: tokens[0].secret_env: $KIRA_TEST_UNSET is not set"},
		{"tokens:\n  - name: a\n    secret_env: KIRA_TEST_SHORT\n", ":3:17: tokens[0].secret_env: the secret is 12 bytes, under the minimum of 16"},
		{"tokens:\n  - name: a\n    secret_env: KIRA_TEST_SECRET_A\n    secret_file: a.token\n", ":2:9: tokens[0]: give exactly one of secret_file"},
		{"tokens:\n  - name: token\n    secret_file: a.token\n", `:2:11: tokens[0].name: "token" is the name of --http-token-file's token`},
		{"tokens:\n  - name: Admin\n    secret_file: a.token\n", `:2:11: tokens[0].name: "Admin": use lower-case`},
		{"tokens:\n  - name: a\n    secret_file: a.token\n  - name: a\n    secret_env: KIRA_TEST_SECRET_A\n", `:4:11: tokens[1].name: a second token named "a"`},
		{"tokens:\n  - name: a\n    secret_file: a.token\n  - name: b\n    secret_env: KIRA_TEST_SECRET_A\n", `:4:9: tokens[1]: token "b" has the same secret as token "a"`},
		{"certificates:\n  - subject: deployer\n", `:2:14: certificates[0].subject: subject "deployer": "deployer" is not TYPE=value`},
		{"certificates:\n  - subject: CN=a\n  - subject: cn = a\n", `:3:14: certificates[1].subject: subject "cn = a" is listed twice`},
		{"unlisted_certificates: no\ncertificates:\n  - subject: CN=a\n", `:1:24: unlisted_certificates: "no": want unscoped`},
		{"tokens: []\n", ":1:9: tokens: the file lists no tokens and no certificates"},
		{"", ": the file is empty"},
		{"tokens: [", ":1:"},
		{"tokens:\n  - name: [a]\n", `:2:11: name: "[" is not of type string`},
	} {
		file := writeCredentials(t, tc.yaml)
		_, err := LoadCredentials(file)
		if err == nil || !strings.Contains(err.Error(), file+tc.want) {
			t.Errorf("%q: %v; want %q", tc.yaml, err, file+tc.want)
			continue
		}
		for _, secret := range []string{secretA, "short-secret"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%q: the error shows a secret: %v", tc.yaml, err)
			}
		}
	}
}

// A file's token may not share its secret with --http-token-file's: the
// error names the file, line and token, never the secret.
func TestCredentialsBesideTheOldToken(t *testing.T) {
	file := writeCredentials(t, "tokens:\n  - name: a\n    secret_file: a.token\n")
	c, err := LoadCredentials(file)
	if err != nil {
		t.Fatal(err)
	}
	err = Auth{Token: []byte(secretA), Credentials: c}.Check()
	if err == nil || !strings.Contains(err.Error(), file+`:3:18: tokens[0].secret_file: token "a" has the same secret as --http-token-file's`) || strings.Contains(err.Error(), secretA) {
		t.Fatalf("%v; want an error naming the line, not the secret", err)
	}
	if err := (Auth{Token: []byte(secretB), Credentials: c}).Check(); err != nil {
		t.Fatal(err)
	}
}
