package config

import (
	"fmt"
	"strings"
	"unicode"
)

// A stored job's manager is who writes it (docs/catalog.md, "Who manages a
// job"): the whole-catalog writers, ManagerApply and ManagerFile, are one
// family, whose write of a whole catalog replaces the family's jobs and keeps
// the others'; a single-job writer (PutJob, DeleteJob) names itself
// "api:<name>" or "cli:<name>". Within the family, FileVerdict decides
// between a file and kira apply, as before managers.
type Manager string

const (
	// ManagerApply stores kira apply -f and PUT /v1/catalog. A job stored
	// without a manager, by an older version, is ManagerApply's.
	ManagerApply Manager = "apply"
	// ManagerFile stores a member's --catalog file (StoreFile).
	ManagerFile Manager = "file"
	// MaxManagerLength bounds a manager's name, prefix included.
	MaxManagerLength = 128
)

// ManagerAPI and ManagerCLI name a single-job writer: the API's caller, or
// a command line's user.
func ManagerAPI(name string) Manager { return Manager("api:" + name) }
func ManagerCLI(name string) Manager { return Manager("cli:" + name) }

// Family reports whether m is a whole-catalog manager (apply, file, or none
// recorded).
func (m Manager) Family() bool { return m == "" || m == ManagerApply || m == ManagerFile }

// String is m as users read it: an absent manager is apply's.
func (m Manager) String() string {
	if m == "" {
		return string(ManagerApply)
	}
	return string(m)
}

// ValidateSingle refuses m unless it names a single-job writer: "api:" or
// "cli:" and a name of printable characters without spaces, at most
// MaxManagerLength in all (TestManagers).
func (m Manager) ValidateSingle() error {
	s := string(m)
	_, name, ok := strings.Cut(s, ":")
	switch {
	case !ok || (!strings.HasPrefix(s, "api:") && !strings.HasPrefix(s, "cli:")):
		return fmt.Errorf("%w: manager %q: a single-job writer is api:<name> or cli:<name> (apply and file write whole catalogs)", ErrInvalidJob, s)
	case name == "":
		return fmt.Errorf("%w: manager %q has no name after the colon", ErrInvalidJob, s)
	case len(s) > MaxManagerLength:
		return fmt.Errorf("%w: manager %q is %d bytes, over the limit of %d", ErrInvalidJob, s, len(s), MaxManagerLength)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%w: manager %q: its name has %q, which is not a printable character other than a space", ErrInvalidJob, s, r)
		}
	}
	return nil
}

// familyOf is the manager a whole write stored as src records.
func familyOf(src Source) Manager {
	if src.By == ByFile {
		return ManagerFile
	}
	return ManagerApply
}

// intern returns the constant for the common managers, so that 100,000
// stored jobs do not each hold a copy of "apply".
func intern(m Manager) Manager {
	switch m {
	case ManagerApply:
		return ManagerApply
	case ManagerFile:
		return ManagerFile
	}
	return m
}
