package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// The raw types mirror the YAML exactly; durations stay strings so that
// validation can report them with their position.
type rawCatalog struct {
	// Revision and Generation are pointers: absent is not the same as 0.
	Revision   *int64         `yaml:"revision"`
	Generation *int64         `yaml:"generation"`
	Cluster    string         `yaml:"cluster"`
	Membership rawMembership  `yaml:"membership"`
	Jobs       []rawJob       `yaml:"jobs"`
	Notify     []rawNotify    `yaml:"notify"`
	Pools      map[string]int `yaml:"pools"`
}

type rawMembership struct {
	LeaseTTL string `yaml:"lease_ttl"`
}

type rawJob struct {
	Name         string            `yaml:"name"`
	Schedule     string            `yaml:"schedule"`
	Partitions   *int              `yaml:"partitions"`
	Timeout      string            `yaml:"timeout"`
	Command      []string          `yaml:"command"`
	HTTP         *rawHTTP          `yaml:"http"`
	Handler      string            `yaml:"handler"`
	FenceURL     string            `yaml:"fence_url"`
	FenceCommand []string          `yaml:"fence_command"`
	Env          map[string]string `yaml:"env"`
	PassEnv      []string          `yaml:"pass_env"`

	Misfire       string      `yaml:"misfire"`
	CatchupWindow string      `yaml:"catchup_window"`
	HistoryLimit  *int        `yaml:"history_limit"`
	Overlap       string      `yaml:"overlap"`
	Retries       *rawRetries `yaml:"retries"`
	Jitter        string      `yaml:"jitter"`
	Timezone      string      `yaml:"timezone"`
	// Notify is a pointer: notify: [] (no rules, not the catalog's) is not
	// the same as no notify: at all.
	Notify    *[]rawNotify      `yaml:"notify"`
	Labels    map[string]string `yaml:"labels"`
	Placement *rawPlacement     `yaml:"placement"`
	// MaxRunning is a pointer: max_running: 0 is refused, not absent.
	MaxRunning *int          `yaml:"max_running"`
	Pool       string        `yaml:"pool"`
	After      []rawUpstream `yaml:"after"`
}

type rawRetries struct {
	Max        int    `yaml:"max"`
	Backoff    string `yaml:"backoff"`
	MaxBackoff string `yaml:"max_backoff"`
}

type rawHTTP struct {
	URL     string            `yaml:"url"`
	Method  string            `yaml:"method"`
	Headers map[string]string `yaml:"headers"`
	Body    string            `yaml:"body"`
}

// document is the parsed YAML, kept to find the position of a field: file,
// and when the jobs: list was parsed in pieces (pieces.go), file is the rest
// of the document and jobs the pieces, in order.
type document struct {
	file *ast.File
	jobs []jobsPiece
}

// at is the document that holds the first n steps of p, and those steps
// as they are found in it.
func (d *document) at(p fieldPath, n int) (*ast.File, fieldPath) {
	switch {
	case len(d.jobs) == 0 || p[0].key != "jobs":
		return d.file, p[:n]
	case n == 1: // the list, which starts in the first piece
		return d.jobs[0].file, p[:1]
	case p[1].key != "":
		return d.file, p[:n]
	}
	k := len(d.jobs) - 1
	for k > 0 && d.jobs[k].first > p[1].index {
		k--
	}
	local := append(fieldPath{p[0], {index: p[1].index - d.jobs[k].first}}, p[2:n]...)
	return d.jobs[k].file, local
}

func decode(file string, data []byte) (raw rawCatalog, doc *document, err error) {
	// The YAML library panics on some malformed input (FuzzParse found a
	// tag on an empty sequence, kept in testdata/fuzz/FuzzParse): a
	// catalog must never crash a member or kira validate.
	defer func() {
		if r := recover(); r != nil {
			raw, doc, err = rawCatalog{}, nil, &Error{Problems: []Problem{{File: file, Message: fmt.Sprintf("the YAML cannot be read (the parser failed: %v)", r)}}}
		}
	}()
	if n := piecesFor(len(data)); n > 1 {
		if raw, doc, ok := decodePieces(data, n); ok {
			return raw, doc, nil
		}
	}
	return decodeWhole(file, data)
}

// decodeWhole is decode with one parse of the whole document.
func decodeWhole(file string, data []byte) (raw rawCatalog, doc *document, err error) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return raw, nil, yamlError(file, err)
	}
	// The document parsed once serves both the decode and the locator: the
	// parse is most of what validating 100,000 jobs costs.
	switch {
	case len(f.Docs) == 0 || f.Docs[0].Body == nil:
		err = yaml.UnmarshalWithOptions(data, &raw, yaml.DisallowUnknownField())
	default:
		var split bool
		if split, err = decodeSplit(f.Docs[0].Body, &raw); !split {
			err = yaml.NodeToValue(f.Docs[0].Body, &raw, yaml.DisallowUnknownField())
		}
	}
	if err != nil {
		return raw, nil, yamlError(file, err)
	}
	return raw, &document{file: f}, nil
}

// yamlError turns a decoder error into a located Problem.
func yamlError(file string, err error) error {
	p := Problem{File: file, Message: err.Error()}
	var ye yaml.Error
	if errors.As(err, &ye) {
		p.Message = ye.GetMessage()
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			p.Line, p.Column = tk.Position.Line, tk.Position.Column
		}
		var typeErr *yaml.TypeError
		if errors.As(err, &typeErr) && typeErr.Token != nil {
			p.Message = fmt.Sprintf("field %q: %q is not of type %s", keyOf(typeErr.Token), typeErr.Token.Value, typeErr.DstType)
		}
		var unknown *yaml.UnknownFieldError
		if errors.As(err, &unknown) {
			p.Message += ": remove it or check its spelling against the catalog reference in the README"
		}
	}
	p.Message = strings.TrimSpace(p.Message)
	return &Error{Problems: []Problem{p}}
}

// keyOf returns the mapping key a value token belongs to, for messages.
func keyOf(tk *token.Token) string {
	for t := tk.Prev; t != nil; t = t.Prev {
		if t.Type == token.MappingValueType {
			if t.Prev != nil {
				return t.Prev.Value
			}
			break
		}
	}
	return "?"
}

// position returns where the field at p is, or the nearest parent that exists.
func (d *document) position(p fieldPath) (line, col int) {
	if tk := d.token(p); tk != nil {
		return tk.Position.Line, tk.Position.Column
	}
	return 0, 0
}

// token is the first token of the field at p, or of its nearest parent
// that exists; nil if none has a position.
func (d *document) token(p fieldPath) *token.Token {
	for n := len(p); n > 0; n-- {
		file, steps := d.at(p, n)
		b := (&yaml.PathBuilder{}).Root()
		for _, s := range steps {
			if s.key == "" {
				b = b.Index(uint(s.index))
			} else {
				b = b.Child(s.key)
			}
		}
		node, err := b.Build().FilterFile(file)
		if err != nil || node == nil {
			continue
		}
		if tk := node.GetToken(); tk != nil && tk.Position != nil {
			return tk
		}
	}
	return nil
}
