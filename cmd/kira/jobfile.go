package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
	"github.com/kira-scheduler/kira/config"
)

// revisionComment starts the comment line of kira job get's YAML that
// holds the job's revision, which kira job put --if-revision file reads.
const revisionComment = "# revision:"

// jobFile is kira job put's -f: one job, as read, and the name its
// problems are told under (the path, or <stdin>).
type jobFile struct {
	label string
	data  []byte
}

// readJobFile reads path, or standard input for -.
func readJobFile(stdin io.Reader, path string) (*jobFile, error) {
	if path == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("kira job put: reading standard input: %w", err)
		}
		return &jobFile{label: "<stdin>", data: data}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kira job put: %w", err)
	}
	return &jobFile{label: path, data: data}, nil
}

// name is the file's name: field, for kira job put without JOB. A file
// that cannot be read as YAML is an error at its line, as the write's own
// would be.
func (f *jobFile) name() (string, error) {
	file, err := parser.ParseBytes(f.data, 0)
	var named struct {
		Name string `yaml:"name"`
	}
	if err == nil && (len(file.Docs) != 1 || file.Docs[0].Body == nil) {
		return "", fmt.Errorf("%s: the file is not one job: write one mapping, as one entry of a catalog's jobs:", f.label)
	}
	if err == nil {
		err = yaml.NodeToValue(file.Docs[0].Body, &named)
	}
	if err != nil {
		p := config.Problem{File: f.label, Message: err.Error()}
		var ye yaml.Error
		if errors.As(err, &ye) {
			p.Message = strings.TrimSpace(ye.GetMessage())
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				p.Line, p.Column = tk.Position.Line, tk.Position.Column
			}
		}
		return "", &config.Error{Problems: []config.Problem{p}}
	}
	if named.Name == "" {
		return "", fmt.Errorf("kira job put: %s has no name: field: give the job's name (kira job put JOB -f %s), or write name: in the file", f.label, f.label)
	}
	return named.Name, nil
}

// revisionLine is the comment line kira job get writes: # revision: N.
var revisionLine = regexp.MustCompile(`^#\s*revision:\s*([0-9]+)\s*$`)

// ifRevision is the revision --if-revision flag names: 0 for none, the
// number given, or, for "file", the one of the file's # revision: comment
// among the comment lines it starts with (TestJobCommandsRoundTrip).
func (f *jobFile) ifRevision(flag string) (int64, error) {
	switch flag {
	case "":
		return 0, nil
	case "file":
		sc := bufio.NewScanner(bytes.NewReader(f.data))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || line == "---" {
				continue
			}
			if !strings.HasPrefix(line, "#") {
				break
			}
			if m := revisionLine.FindStringSubmatch(line); m != nil {
				return strconv.ParseInt(m[1], 10, 64)
			}
		}
		return 0, fmt.Errorf("kira job put: --if-revision file: %s starts with no %q comment line (kira job get writes one): give the revision, --if-revision N", f.label, revisionComment+" N")
	}
	rev, err := strconv.ParseInt(flag, 10, 64)
	if err != nil || rev <= 0 {
		return 0, fmt.Errorf("kira job put: --if-revision %q: want a job's revision (kira job get's, a positive number) or file (the file's %q comment)", flag, revisionComment+" N")
	}
	return rev, nil
}

// problems is e with the problems of the job's body told as the file's:
// the write names them "job NAME", and those of the rules across jobs
// (after:) have no line, which the file's node of their field gives. A nil
// f leaves e as it is.
func (f *jobFile) problems(e *config.Error, name string) error {
	if f == nil {
		return e
	}
	out := &config.Error{Problems: make([]config.Problem, len(e.Problems))}
	for i, p := range e.Problems {
		if p.File == "job "+name {
			p.File = f.label
			if p.Line == 0 && p.Field != "" {
				p.Line, p.Column = f.position(p.Field)
			}
		}
		out.Problems[i] = p
	}
	return out
}

// position is the line and column of field (after[0]) in the file; 0, 0
// when it cannot be found.
func (f *jobFile) position(field string) (line, column int) {
	path, err := yaml.PathString("$." + field)
	if err != nil {
		return 0, 0
	}
	file, err := parser.ParseBytes(f.data, 0)
	if err != nil {
		return 0, 0
	}
	node, err := path.FilterFile(file)
	if err != nil || node == nil || node.GetToken() == nil || node.GetToken().Position == nil {
		return 0, 0
	}
	pos := node.GetToken().Position
	return pos.Line, pos.Column
}
