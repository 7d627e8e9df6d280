package api

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// path is a field of a credentials file: keys (string) and list indexes
// (int), as tokens[0].scope.verbs[1].
type path []any

func (p path) child(key string) path { return append(p[:len(p):len(p)], key) }
func (p path) index(i int) path      { return append(p[:len(p):len(p)], i) }

func (p path) String() string {
	var b strings.Builder
	for i, s := range p {
		switch s := s.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", s)
		case string:
			if i > 0 {
				b.WriteString(".")
			}
			b.WriteString(s)
		}
	}
	return b.String()
}

// document is a parsed credentials file, kept to locate its fields.
type document struct {
	file string
	ast  *ast.File
}

// where is file:line:column of the field at p, or of its nearest parent
// that the file has; file alone if none.
func (d *document) where(p path) string {
	for n := len(p); n > 0 && d.ast != nil; n-- {
		b := (&yaml.PathBuilder{}).Root()
		for _, s := range p[:n] {
			switch s := s.(type) {
			case int:
				b = b.Index(uint(s))
			case string:
				b = b.Child(s)
			}
		}
		node, err := b.Build().FilterFile(d.ast)
		if err != nil || node == nil {
			continue
		}
		if tk := node.GetToken(); tk != nil && tk.Position != nil {
			return fmt.Sprintf("%s:%d:%d", d.file, tk.Position.Line, tk.Position.Column)
		}
	}
	return d.file
}

// yamlError is a parser's or decoder's error, located.
func (d *document) yamlError(err error) error {
	var ye yaml.Error
	if !errors.As(err, &ye) {
		return fmt.Errorf("%s: %w", d.file, err)
	}
	at := d.file
	if tk := ye.GetToken(); tk != nil && tk.Position != nil {
		at = fmt.Sprintf("%s:%d:%d", d.file, tk.Position.Line, tk.Position.Column)
	}
	msg := strings.TrimSpace(ye.GetMessage())
	var typeErr *yaml.TypeError
	if errors.As(err, &typeErr) && typeErr.Token != nil {
		msg = fmt.Sprintf("%s: %q is not of type %s", keyOf(typeErr.Token), typeErr.Token.Value, typeErr.DstType)
	}
	var unknown *yaml.UnknownFieldError
	if errors.As(err, &unknown) {
		msg += ": remove it or check its spelling against docs/security.md"
	}
	return fmt.Errorf("%s: %s", at, msg)
}

// keyOf is the mapping key a value token belongs to, for messages.
func keyOf(tk *token.Token) string {
	for t := tk.Prev; t != nil; t = t.Prev {
		if t.Type == token.MappingValueType && t.Prev != nil {
			return t.Prev.Value
		}
	}
	return "?"
}
