package config

import (
	"bytes"
	"runtime"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"golang.org/x/sync/errgroup"
)

// A large catalog's jobs: list is parsed in pieces: the YAML library's
// parse is most of what validating or applying 100,000 jobs costs, its time
// grows faster than the document, and it uses one core (docs/benchmarks.md,
// "Many jobs"). The pieces are the lines of a top-level block jobs: list cut
// between items, each parsed under a jobs: key at its own line numbers, and
// the rest of the document with those lines blank; one per processor at a
// time. Anything this file does not recognise, and anything a piece's parse
// or decode refuses, sends the document to the whole parse, so a catalog's
// errors are always the whole parse's and its result is the same either way
// (TestPiecesAgreeWithTheWholeParse, FuzzPieces).

// pieceBytes is about the size of one piece; a document under two pieces
// is parsed whole.
const pieceBytes = 256 << 10

// jobsPiece is one piece of a jobs: list: its parsed document, whose lines
// are the file's, and the index in the list of its first job.
type jobsPiece struct {
	first int
	file  *ast.File
}

// decodePieces decodes data as decode does, parsing its jobs: list in up to
// n pieces; ok is false, and nothing is decoded, when it cannot.
func decodePieces(data []byte, n int) (raw rawCatalog, doc *document, ok bool) {
	defer func() {
		if recover() != nil { // the library's: the whole parse reports it
			raw, doc, ok = rawCatalog{}, nil, false
		}
	}()
	rest, texts, items := cutJobs(data, n)
	if texts == nil {
		return raw, nil, false
	}
	files := make([]*ast.File, 1+len(texts))
	var parsers errgroup.Group
	parsers.SetLimit(runtime.GOMAXPROCS(0))
	for i, text := range append([][]byte{rest}, texts...) {
		parsers.Go(func() error { files[i] = parsePiece(text); return nil })
	}
	parsers.Wait()
	var jobs []rawJob
	pieces := make([]jobsPiece, len(texts))
	for i, f := range files[1:] {
		seq := onlyJobs(f)
		// A cut inside a value of many lines would show as a piece whose
		// items are not the lines cutJobs counted.
		if seq == nil || len(seq.Values) != items[i] {
			return raw, nil, false
		}
		for _, item := range seq.Values {
			if _, isMap := item.(*ast.MappingNode); !isMap {
				return raw, nil, false // an empty item's place depends on what follows it
			}
		}
		decoded, ok := decodeJobs(seq)
		if !ok && yaml.NodeToValue(seq, &decoded, yaml.DisallowUnknownField()) != nil {
			return raw, nil, false
		}
		pieces[i] = jobsPiece{first: len(jobs), file: f}
		jobs = append(jobs, decoded...)
	}
	if !decodeRest(files[0], &raw) {
		return rawCatalog{}, nil, false
	}
	raw.Jobs = jobs
	return raw, &document{file: files[0], jobs: pieces}, true
}

// parsePiece parses one piece, nil for anything but one document without
// errors (the library's panics included).
func parsePiece(text []byte) (f *ast.File) {
	defer func() {
		if recover() != nil {
			f = nil
		}
	}()
	f, err := parser.ParseBytes(text, 0)
	if err != nil || len(f.Docs) != 1 || f.Docs[0].Body == nil {
		return nil
	}
	return f
}

// onlyJobs is the list of a piece that is a mapping of one key, jobs:, to a
// list; nil otherwise.
func onlyJobs(f *ast.File) *ast.SequenceNode {
	if f == nil {
		return nil
	}
	m, isMap := f.Docs[0].Body.(*ast.MappingNode)
	if !isMap || len(m.Values) != 1 {
		return nil
	}
	if k, isString := m.Values[0].Key.(*ast.StringNode); !isString || k.Value != "jobs" {
		return nil
	}
	seq, _ := m.Values[0].Value.(*ast.SequenceNode)
	return seq
}

// decodeRest decodes the document without its jobs: list into raw: a
// block mapping of plain keys, jobs: among them once with no value (in a
// flow mapping, the list's lines are a list only by the library's leniency).
func decodeRest(f *ast.File, raw *rawCatalog) bool {
	if f == nil {
		return false
	}
	m, isMap := f.Docs[0].Body.(*ast.MappingNode)
	if !isMap || m.IsFlowStyle {
		return false
	}
	rest, jobs, ok := withoutJobs(m)
	if _, null := jobs.(*ast.NullNode); !ok || !null {
		return false
	}
	return yaml.NodeToValue(rest, raw, yaml.DisallowUnknownField()) == nil
}

// cutJobs finds data's top-level block jobs: list, a line "jobs:" at the
// margin followed by items "- " at one indentation, and cuts it between
// items into up to n texts of about equal size, each the "jobs:" key and its
// lines at their line numbers (blank lines before), with the count of items
// each holds; rest is data with the list's lines blank. texts is nil when
// data has no such list, or more than one line "jobs:", or a line that
// could start a document or a directive, or a carriage return.
func cutJobs(data []byte, n int) (rest []byte, texts [][]byte, items []int) {
	if bytes.IndexByte(data, '\r') >= 0 {
		return nil, nil, nil
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	key := -1
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte("---")) || bytes.HasPrefix(l, []byte("...")) || bytes.HasPrefix(l, []byte("%")) {
			return nil, nil, nil
		}
		if string(bytes.TrimRight(l, " \n")) == "jobs:" {
			if key >= 0 {
				return nil, nil, nil
			}
			key = i
		}
	}
	if key < 0 {
		return nil, nil, nil
	}
	starts, end := listItems(lines, key+1)
	if len(starts) < n {
		return nil, nil, nil
	}
	size := 0
	for _, l := range lines[key+1 : end] {
		size += len(l)
	}
	cuts := []int{starts[0]}
	count, sum := 0, 0
	next := 0 // the next item start
	for i := starts[0]; i < end; i++ {
		if next < len(starts) && starts[next] == i {
			if sum >= size/n*len(cuts) && len(cuts) < n && count > 0 {
				cuts, items = append(cuts, i), append(items, count)
				count = 0
			}
			next++
			count++
		}
		sum += len(lines[i])
	}
	cuts, items = append(cuts, end), append(items, count)
	for c := 0; c+1 < len(cuts); c++ {
		var b bytes.Buffer
		b.Write(bytes.Repeat([]byte("\n"), cuts[c]-1))
		b.WriteString("jobs:\n")
		for _, l := range lines[cuts[c]:cuts[c+1]] {
			b.Write(l)
		}
		texts = append(texts, b.Bytes())
	}
	var r bytes.Buffer
	for i, l := range lines {
		if i > key && i < end {
			if bytes.HasSuffix(l, []byte("\n")) {
				r.WriteByte('\n')
			}
			continue
		}
		r.Write(l)
	}
	return r.Bytes(), texts, items
}

// listItems reads the block list whose lines begin at lines[from]: the
// lines where its items start ("- " at the indentation of the first), and
// end, the first line past it (a line at the margin that is not an item, or
// the end). starts is nil when the list's first line is not an item, or a
// line inside it is not an item but indented as its items or less, and not
// at the margin.
func listItems(lines [][]byte, from int) (starts []int, end int) {
	indent := -1
	for end = from; end < len(lines); end++ {
		l := bytes.TrimRight(lines[end], "\n")
		body := bytes.TrimLeft(l, " ")
		at := len(l) - len(body)
		if len(body) == 0 || body[0] == '#' {
			continue
		}
		item := bytes.HasPrefix(body, []byte("- "))
		if indent < 0 {
			if !item {
				return nil, 0
			}
			indent = at
		}
		switch {
		case at == indent && item:
			starts = append(starts, end)
		case at == 0:
			return starts, end
		case at <= indent: // which the library reads leniently
			return nil, 0
		}
	}
	return starts, end
}

// piecesFor is how many pieces a document of size bytes is parsed in.
func piecesFor(size int) int {
	return (size + pieceBytes - 1) / pieceBytes
}
