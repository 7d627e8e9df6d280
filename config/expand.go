package config

import (
	"fmt"
	"regexp"
	"strings"
)

// References are how a catalog names secrets without holding them: the
// values of env, http.url, http.headers and http.body may say ${NAME},
// which each member replaces with NAME from its own environment when it
// runs the job, so a token never reaches etcd, kira status or kira history.
// $$ is a literal $. A reference to a variable the member does not have
// fails that execution with a message naming it, never an empty string.

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Expand replaces every ${NAME} of s with lookup(NAME) and every $$ with $.
// It fails on a malformed reference, or on a name lookup does not have.
func Expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '$' {
			b.WriteByte('$')
			i++
			continue
		}
		name, end, err := reference(s, i)
		if err != nil {
			return "", err
		}
		v, ok := lookup(name)
		if !ok {
			return "", fmt.Errorf("${%s} is not set in the member's environment", name)
		}
		b.WriteString(v)
		i = end
	}
	return b.String(), nil
}

// References returns the names s refers to, in order, or the first
// malformed reference.
func References(s string) ([]string, error) {
	var names []string
	_, err := Expand(s, func(name string) (string, bool) { names = append(names, name); return "", true })
	return names, err
}

// reference reads the reference that starts at s[i] == '$' and returns its
// name and the index of its closing brace.
func reference(s string, i int) (string, int, error) {
	if i+1 >= len(s) || s[i+1] != '{' {
		return "", 0, fmt.Errorf("a $ at offset %d is neither ${NAME} nor $$ (write $$ for a literal $)", i)
	}
	end := strings.IndexByte(s[i:], '}')
	if end < 0 {
		return "", 0, fmt.Errorf("${ at offset %d is not closed with }", i)
	}
	name := s[i+2 : i+end]
	if !envName.MatchString(name) {
		return "", 0, fmt.Errorf("${%s} is not a variable name (letters, digits and _, not starting with a digit)", name)
	}
	return name, i + end, nil
}

// DefaultPassEnv are the member's environment variables a command job
// inherits unless its pass_env adds others: enough for a program to find
// its tools, its home and its locale. The member's own settings (KIRA_*,
// its etcd credentials above all) are never passed.
var DefaultPassEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "TZ", "TMPDIR"}

// reservedEnv reports whether name belongs to Kira: the KIRA_* variables a
// job receives (KIRA_JOB, KIRA_FENCING_TOKEN, …) and the member's own
// (KIRA_ETCD_PASSWORD, …), which no catalog may set or pass on.
func reservedEnv(name string) bool { return strings.HasPrefix(name, "KIRA_") }
