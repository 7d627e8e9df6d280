package api

import (
	"strings"
	"testing"
)

// A scope allows a verb on a job only if each of its parts that is set
// does: the name (exact, or a prefix ending in *), the labels of every
// definition given, the verb. No scope allows everything, the whole
// catalog too; any scope refuses whole-catalog writes.
func TestScopeAllows(t *testing.T) {
	growth := map[string]string{"team": "growth"}
	billing := map[string]string{"team": "billing"}
	customers := &scope{jobs: []string{"customer-*", "report"}}
	labelled := &scope{labels: growth, verbs: []verb{verbTrigger, verbWrite}}
	for _, tc := range []struct {
		s      *scope
		v      verb
		name   string
		labels []map[string]string
		want   string // "" allowed, else a part of why not
	}{
		{nil, verbCatalog, "", nil, ""},
		{nil, verbPause, "billing-run", nil, ""},
		{customers, verbTrigger, "customer-42", nil, ""},
		{customers, verbPause, "customer-", nil, ""},
		{customers, verbTrigger, "report", nil, ""},
		{customers, verbTrigger, "reports", nil, "matches none of its scope's jobs (customer-*, report)"},
		{customers, verbTrigger, "billing-run", nil, "the name billing-run matches none"},
		{customers, verbCatalog, "", nil, "a whole-catalog write needs an unscoped credential, and this one is limited to jobs customer-*, report"},
		{&scope{jobs: []string{"*"}}, verbWrite, "anything", nil, ""},
		{labelled, verbTrigger, "x", []map[string]string{growth}, ""},
		{labelled, verbTrigger, "x", nil, ""}, // a job not stored: the name decides
		{labelled, verbTrigger, "x", []map[string]string{billing}, "the job's labels ({team=billing}) lack team=growth"},
		{labelled, verbTrigger, "x", []map[string]string{nil}, "lack team=growth"},
		{labelled, verbPause, "x", []map[string]string{growth}, "its scope allows the verbs trigger, write, not pause"},
		{labelled, verbWrite, "x", []map[string]string{growth, growth}, ""},
		{labelled, verbWrite, "x", []map[string]string{growth, billing}, "the new definition's labels"},
		{labelled, verbWrite, "x", []map[string]string{billing, growth}, "the job's labels"},
	} {
		got := tc.s.refuses(tc.v, tc.name, tc.labels...)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("scope %v: %s %s %v: %q; want %q", tc.s, tc.v, tc.name, tc.labels, got, tc.want)
		}
	}
}

// A certificate's subject is one subject however it is written: Go's
// form, RFC 2253's, openssl's default with spaces and the other order;
// an escaped comma stays in its value; anything not TYPE=value is refused.
func TestCertificateSubjects(t *testing.T) {
	want, err := canonicalSubject("CN=deployer,O=Acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"CN=deployer,O=Acme", "O = Acme, CN = deployer", "cn=deployer, o=Acme"} {
		if got, err := canonicalSubject(s); err != nil || got != want {
			t.Errorf("%q: %q %v; want %q", s, got, err, want)
		}
	}
	for _, s := range []string{`CN=deployer\,O=Acme`, "CN=deployer", "CN=Deployer,O=Acme", "CN=deployer,O=Acme,OU=x"} {
		if got, _ := canonicalSubject(s); got == want {
			t.Errorf("%q is the subject %q", s, want)
		}
	}
	for _, s := range []string{"deployer", "CN=", "CN=a,,O=b", "=x"} {
		if _, err := canonicalSubject(s); err == nil || !strings.Contains(err.Error(), "TYPE=value") {
			t.Errorf("%q: %v; want an error", s, err)
		}
	}
}
