package config

import (
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	env := map[string]string{"TOKEN": "s3cret", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct{ in, want, err string }{
		{"plain", "plain", ""},
		{"Bearer ${TOKEN}", "Bearer s3cret", ""},
		{"${TOKEN}${TOKEN}", "s3crets3cret", ""},
		{"cost $$5 ${EMPTY}.", "cost $5 .", ""},
		{"${MISSING}", "", "${MISSING} is not set in the member's environment"},
		{"$TOKEN", "", "neither ${NAME} nor $$"},
		{"${TOKEN", "", "is not closed"},
		{"${1X}", "", "is not a variable name"},
		{"${}", "", "is not a variable name"},
		{"trailing $", "", "neither ${NAME} nor $$"},
	} {
		got, err := Expand(tc.in, lookup)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Expand(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("Expand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	names, err := References("a ${X} b ${Y_2} $$ c")
	if err != nil || strings.Join(names, ",") != "X,Y_2" {
		t.Fatalf("References = %v, %v", names, err)
	}
}

// A catalog refers to secrets but never holds them: malformed references,
// env on a job that is not a command, and Kira's own variables are
// refused with their place; a reference this environment lacks is a
// warning.
func TestEnvironmentValidation(t *testing.T) {
	t.Setenv("KIRA_TEST_PRESENT", "x")
	_, warnings, err := Lint("c.yaml", []byte(`jobs:
  - name: ok
    schedule: "@every 1s"
    command: ["env"]
    env: {API_TOKEN: "${KIRA_TEST_PRESENT}", OTHER: "${KIRA_TEST_ABSENT}"}
    pass_env: [GOPATH]
  - name: web
    schedule: "@every 1s"
    http: {url: "${KIRA_TEST_BASE}/hook", headers: {Authorization: "Bearer ${KIRA_TEST_PRESENT}"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0].String(), "c.yaml:5:") || !strings.Contains(warnings[0].String(), "${KIRA_TEST_ABSENT} is not set") ||
		!strings.Contains(warnings[1].String(), "jobs[1].http.url: ${KIRA_TEST_BASE}") {
		t.Fatalf("warnings: %v", warnings)
	}
	_, err = Parse("c.yaml", []byte(`jobs:
  - name: bad
    schedule: "@every 1s"
    command: ["env"]
    env: {KIRA_JOB: "x", "1BAD": "y", FINE: "$oops"}
    pass_env: [KIRA_ETCD_PASSWORD]
  - name: web
    schedule: "@every 1s"
    http: {url: "http://h/${broken"}
    env: {A: "b"}
`))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`c.yaml:5:34: jobs[0].env.1BAD: "1BAD" is not an environment variable name`,
		`jobs[0].env.FINE: a $ at offset 0 is neither ${NAME} nor $$`,
		`jobs[0].env.KIRA_JOB: KIRA_JOB: KIRA_* variables are Kira's own`,
		`jobs[0].pass_env[0]: KIRA_ETCD_PASSWORD: KIRA_* variables are the member's own, its etcd credentials among them`,
		`jobs[1].http.url: ${ at offset 9 is not closed`,
		`jobs[1]: env and pass_env apply to command jobs`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}
