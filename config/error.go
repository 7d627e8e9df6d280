package config

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a catalog, located in its file.
type Problem struct {
	File    string
	Line    int // 1-based; 0 when the position is unknown
	Column  int
	Field   string // path of the field, such as jobs[1].schedule; empty for syntax errors
	Message string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", p.Line, p.Column)
	}
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Error is returned when a catalog is invalid; it lists every problem found.
type Error struct {
	Problems []Problem
	// open is the catalog when its only problems are after: targets it
	// lacks (UnresolvedCatalog).
	open *Catalog
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// fieldPath names a field of the catalog both for users (jobs[1].schedule)
// and for finding its node in the YAML document.
type fieldPath []pathStep

type pathStep struct {
	key   string
	index int // used when key is ""
}

func root(key string) fieldPath { return fieldPath{{key: key}} }

func (p fieldPath) child(key string) fieldPath {
	return append(p[:len(p):len(p)], pathStep{key: key})
}

func (p fieldPath) index(i int) fieldPath {
	return append(p[:len(p):len(p)], pathStep{index: i})
}

func (p fieldPath) String() string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.key == "":
			fmt.Fprintf(&b, "[%d]", s.index)
		case i > 0:
			b.WriteString(".")
			b.WriteString(s.key)
		default:
			b.WriteString(s.key)
		}
	}
	return b.String()
}
