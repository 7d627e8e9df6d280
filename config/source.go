package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// How a catalog was stored (Source.By).
const (
	ByApply = "apply" // kira apply
	ByAPI   = "api"   // PUT /v1/catalog
	ByFile  = "file"  // a member's --catalog file, at its start
)

// Source records how the stored catalog was stored: it decides whether a
// member's --catalog file may replace it (FileVerdict), and kira status and
// kira catalog --history show it.
type Source struct {
	By string `json:"by"`
	// Member is the name of the member whose --catalog file it was (ByFile).
	Member string `json:"member,omitempty"`
	// File, Digest and Generation describe that file: its path on the
	// member, "sha256:" and the hex digest of its bytes, its generation:.
	File       string `json:"file,omitempty"`
	Digest     string `json:"digest,omitempty"`
	Generation int64  `json:"generation,omitempty"`
	// At is when it was stored, by the writer's clock.
	At time.Time `json:"at"`
}

// FileSource is the Source of a member's --catalog file read from path.
func FileSource(path string, data []byte, cat *Catalog) Source {
	sum := sha256.Sum256(data)
	return Source{By: ByFile, File: path, Digest: "sha256:" + hex.EncodeToString(sum[:]), Generation: cat.Generation}
}

// String says who stored it, for logs and kira status.
func (s *Source) String() string {
	if s == nil {
		return "not recorded (stored by an older version of Kira, or by hand)"
	}
	at := s.At.UTC().Format(time.RFC3339)
	switch s.By {
	case ByFile:
		gen := "no generation"
		if s.Generation > 0 {
			gen = fmt.Sprintf("generation %d", s.Generation)
		}
		return fmt.Sprintf("member %s from its --catalog file %s (%s, %s) at %s", s.Member, s.File, s.Digest, gen, at)
	}
	if s.By == ByAPI {
		return "PUT /v1/catalog at " + at
	}
	return "kira apply at " + at
}

// FileVerdict decides whether a member's --catalog file (src, whose
// catalog's JSON differs from the stored one's) replaces the stored
// catalog: the rule is that a file replaces only a catalog stored from a
// --catalog file with a lower generation:, so a rollout of a file with a
// higher generation converges without flip-flop, and a restart with an
// older file, or any file over kira apply's catalog, changes nothing
// (TestFileVerdicts, TestRollingRestartNeverGoesBack). It returns "" to
// store, else why not.
func FileVerdict(stored *Source, src Source) string {
	switch {
	case stored == nil:
		return "the stored catalog was stored by an older version of Kira (its source is not recorded), so a file never replaces it"
	case stored.By != ByFile:
		return fmt.Sprintf("the stored catalog was stored by %s; a --catalog file never replaces it", stored)
	case src.Generation == 0:
		return fmt.Sprintf("the file has no generation:, so it never replaces a stored catalog (stored by %s)", stored)
	case src.Generation < stored.Generation:
		return fmt.Sprintf("the file is older: generation %d, the stored catalog's is %d (stored by %s)", src.Generation, stored.Generation, stored)
	case src.Generation == stored.Generation:
		return fmt.Sprintf("the file has the stored catalog's generation %d but other content (stored by %s): raise generation: in the newer file", src.Generation, stored)
	}
	return ""
}
