package api

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
)

// Credentials are the named credentials of a credentials file (kira run
// --http-credentials FILE): bearer tokens, each with its name and secret,
// and client-certificate subjects, each with an optional scope. A
// credential without a scope is unscoped. Secrets are never in an error,
// a log line or a String (TestCredentialsFileErrors, TestCredentialsFile).
type Credentials struct {
	file   string
	tokens []namedToken
	// certs are the certificates listed, by canonical subject.
	certs map[string]*scope
	// refuseUnlisted refuses a verified certificate that is not listed;
	// otherwise it is unscoped, as without a credentials file.
	refuseUnlisted bool
}

// String names the file and its credentials, never a secret: what a log
// line or an error may show of them (TestCredentialsFile).
func (c Credentials) String() string {
	names := make([]string, len(c.tokens))
	for i, t := range c.tokens {
		names[i] = t.name
	}
	return fmt.Sprintf("credentials of %s: tokens [%s], %d certificates", c.file, strings.Join(names, " "), len(c.certs))
}

// GoString is String: %#v shows no secret either.
func (c Credentials) GoString() string { return c.String() }

// namedToken is one bearer token: at is where its secret is named in the
// file, for errors.
type namedToken struct {
	name   string
	secret []byte
	scope  *scope
	at     string
}

// MinSecretBytes is the shortest secret a credentials file's token may have.
const MinSecretBytes = 16

// LegacyTokenName is the name of the unscoped token of --http-token-file
// (or KIRA_HTTP_TOKEN): a credentials file may not use it.
const LegacyTokenName = "token"

// The raw types mirror the file exactly (strict: an unknown field is an error).
type rawCredentials struct {
	UnlistedCertificates string           `yaml:"unlisted_certificates"`
	Tokens               []rawToken       `yaml:"tokens"`
	Certificates         []rawCertificate `yaml:"certificates"`
}

type rawToken struct {
	Name       string    `yaml:"name"`
	SecretFile string    `yaml:"secret_file"`
	SecretEnv  string    `yaml:"secret_env"`
	Scope      *rawScope `yaml:"scope"`
}

type rawCertificate struct {
	Subject string    `yaml:"subject"`
	Scope   *rawScope `yaml:"scope"`
}

type rawScope struct {
	Jobs   []string          `yaml:"jobs"`
	Labels map[string]string `yaml:"labels"`
	Verbs  []string          `yaml:"verbs"`
}

var (
	tokenName   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	jobPattern  = regexp.MustCompile(`^[a-z0-9-]*\*?$`)
	labelString = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)
)

// LoadCredentials reads and checks the credentials file: every problem,
// each as file:line:column: field: what is wrong, and nothing usable
// unless there is none.
func LoadCredentials(file string) (*Credentials, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	l := &loader{file: file, dir: filepath.Dir(file)}
	c := l.load(data)
	if len(l.problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(l.problems, "\n"))
	}
	return c, nil
}

// loader reads one credentials file, collecting its problems.
type loader struct {
	file, dir string
	doc       *document
	problems  []string
}

func (l *loader) addf(p path, format string, args ...any) {
	l.problems = append(l.problems, fmt.Sprintf("%s: %s: %s", l.doc.where(p), p, fmt.Sprintf(format, args...)))
}

func (l *loader) load(data []byte) *Credentials {
	var raw rawCredentials
	if err := l.decode(data, &raw); err != nil {
		l.problems = append(l.problems, err.Error())
		return nil
	}
	c := &Credentials{file: l.file, certs: map[string]*scope{}}
	switch raw.UnlistedCertificates {
	case "", "unscoped":
	case "refused":
		c.refuseUnlisted = true
	default:
		l.addf(path{"unlisted_certificates"}, "%q: want unscoped (a verified certificate not listed may do everything, the default) or refused", raw.UnlistedCertificates)
	}
	if len(raw.Tokens) == 0 && len(raw.Certificates) == 0 {
		l.addf(path{"tokens"}, "the file lists no tokens and no certificates")
	}
	for i, rt := range raw.Tokens {
		if t, ok := l.token(path{"tokens", i}, rt, c.tokens); ok {
			c.tokens = append(c.tokens, t)
		}
	}
	for i, rc := range raw.Certificates {
		l.certificate(path{"certificates", i}, rc, c.certs)
	}
	return c
}

// decode parses data strictly into raw, keeping the document to locate fields.
func (l *loader) decode(data []byte, raw *rawCredentials) (err error) {
	// The YAML library panics on some malformed input (see config's decode).
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: the YAML cannot be read (the parser failed: %v)", l.file, r)
		}
	}()
	l.doc = &document{file: l.file}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return l.doc.yamlError(err)
	}
	l.doc.ast = f
	if len(f.Docs) == 0 || f.Docs[0].Body == nil {
		return fmt.Errorf("%s: the file is empty: list tokens: or certificates:", l.file)
	}
	if err := yaml.NodeToValue(f.Docs[0].Body, raw, yaml.DisallowUnknownField()); err != nil {
		return l.doc.yamlError(err)
	}
	return nil
}

func (l *loader) token(p path, rt rawToken, before []namedToken) (namedToken, bool) {
	n := len(l.problems)
	switch {
	case rt.Name == "":
		l.addf(p, "name is required")
	case !tokenName.MatchString(rt.Name):
		l.addf(p.child("name"), "%q: use lower-case letters, digits, '.', '_' and '-', starting with a letter or digit, at most 63 characters", rt.Name)
	case rt.Name == LegacyTokenName:
		l.addf(p.child("name"), "%q is the name of --http-token-file's token (KIRA_HTTP_TOKEN): choose another", rt.Name)
	case slices.ContainsFunc(before, func(t namedToken) bool { return t.name == rt.Name }):
		l.addf(p.child("name"), "a second token named %q: names must be unique, they say who made each change", rt.Name)
	}
	t := namedToken{name: rt.Name, scope: l.scope(p.child("scope"), rt.Scope)}
	t.secret, t.at = l.secret(p, rt)
	if t.secret != nil {
		for _, o := range before {
			if string(o.secret) == string(t.secret) {
				l.addf(p, "token %q has the same secret as token %q: give each its own, or the API cannot tell them apart", rt.Name, o.name)
			}
		}
	}
	return t, len(l.problems) == n
}

// secret reads a token's secret: the first line of secret_file (relative
// to the credentials file's directory), or the variable secret_env.
func (l *loader) secret(p path, rt rawToken) ([]byte, string) {
	var s string
	switch {
	case (rt.SecretFile == "") == (rt.SecretEnv == ""):
		l.addf(p, "give exactly one of secret_file (a file whose first line is the token) and secret_env (a variable that holds it)")
		return nil, ""
	case rt.SecretFile != "":
		p = p.child("secret_file")
		name := rt.SecretFile
		if !filepath.IsAbs(name) {
			name = filepath.Join(l.dir, name)
		}
		data, err := os.ReadFile(name)
		if err != nil {
			l.addf(p, "%v", err)
			return nil, ""
		}
		s, _, _ = strings.Cut(string(data), "\n")
		s = strings.TrimRight(s, "\r")
	default:
		p = p.child("secret_env")
		var ok bool
		if s, ok = os.LookupEnv(rt.SecretEnv); !ok {
			l.addf(p, "$%s is not set", rt.SecretEnv)
			return nil, ""
		}
	}
	if len(s) < MinSecretBytes {
		l.addf(p, "the secret is %d bytes, under the minimum of %d: make a long random one, such as openssl rand -hex 32 writes", len(s), MinSecretBytes)
		return nil, ""
	}
	return []byte(s), fmt.Sprintf("%s: %s", l.doc.where(p), p)
}

func (l *loader) certificate(p path, rc rawCertificate, certs map[string]*scope) {
	key, err := canonicalSubject(rc.Subject)
	switch {
	case rc.Subject == "":
		l.addf(p, "subject is required: the certificate's subject as RFC 2253 writes it, such as CN=deployer,O=Acme (openssl x509 -noout -subject -nameopt RFC2253)")
		return
	case err != nil:
		l.addf(p.child("subject"), "%v", err)
		return
	}
	if _, dup := certs[key]; dup {
		l.addf(p.child("subject"), "subject %q is listed twice", rc.Subject)
		return
	}
	certs[key] = l.scope(p.child("scope"), rc.Scope)
}

// scope checks a credential's scope: nil when it has none (unscoped).
func (l *loader) scope(p path, rs *rawScope) *scope {
	if rs == nil {
		return nil
	}
	if len(rs.Jobs) == 0 && len(rs.Labels) == 0 && len(rs.Verbs) == 0 {
		l.addf(p, "an empty scope limits nothing: give jobs, labels or verbs, or leave scope out for an unscoped credential")
		return nil
	}
	s := &scope{jobs: rs.Jobs, labels: rs.Labels}
	for i, j := range rs.Jobs {
		if !jobPattern.MatchString(j) || j == "" {
			l.addf(p.child("jobs").index(i), "%q: want a job name (lower-case letters, digits and '-') or a prefix ending in *, such as customer-*", j)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(rs.Labels)) {
		if !labelString.MatchString(k) || (rs.Labels[k] != "" && !labelString.MatchString(rs.Labels[k])) {
			l.addf(p.child("labels").child(k), "%s=%q: use letters, digits, '-', '_' and '.', starting and ending with a letter or digit, as job labels do", k, rs.Labels[k])
		}
	}
	for i, v := range rs.Verbs {
		if !slices.Contains(scopeVerbs, verb(v)) {
			l.addf(p.child("verbs").index(i), "%q: want write (create, replace or delete a job), trigger (run, or cancel a waiting run) or pause (pause or resume)", v)
			continue
		}
		s.verbs = append(s.verbs, verb(v))
	}
	return s
}
