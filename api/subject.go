package api

import (
	"fmt"
	"slices"
	"strings"
)

// canonicalSubject is a certificate subject reduced to what identifies it:
// its attributes TYPE=value, types upper-cased, spaces around '=', ',' and
// '+' dropped, sorted. So the subject Go prints (CN=deployer,O=Acme),
// RFC 2253's (openssl -nameopt RFC2253, the same) and openssl's default
// (O = Acme, CN = deployer) are one subject (TestCertificateSubjects).
// A backslash escapes the character after it, as RFC 2253 writes a ',' in
// a value.
func canonicalSubject(s string) (string, error) {
	var attrs []string
	for _, a := range splitUnescaped(s) {
		typ, val, ok := strings.Cut(a, "=")
		typ, val = strings.ToUpper(strings.TrimSpace(typ)), strings.TrimSpace(val)
		if !ok || typ == "" || val == "" {
			return "", fmt.Errorf("subject %q: %q is not TYPE=value; write the subject as RFC 2253 does, such as CN=deployer,O=Acme (openssl x509 -noout -subject -nameopt RFC2253)", s, strings.TrimSpace(a))
		}
		attrs = append(attrs, typ+"="+val)
	}
	slices.Sort(attrs)
	return strings.Join(attrs, ","), nil
}

// splitUnescaped splits s at each ',' or '+' that no backslash escapes.
func splitUnescaped(s string) []string {
	var out []string
	start, escaped := 0, false
	for i := 0; i < len(s); i++ {
		switch {
		case escaped:
			escaped = false
		case s[i] == '\\':
			escaped = true
		case s[i] == ',' || s[i] == '+':
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
