package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// LoadLintPath is LoadLint of a file, or LintDir of a directory.
func LoadLintPath(path string) (*Catalog, []Problem, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	if info.IsDir() {
		return LintDir(path)
	}
	return LoadLint(path)
}

// settings are the top-level fields other than jobs:, in the order of rawCatalog.
var settings = []string{"revision", "generation", "cluster", "membership", "notify"}

// part is one file of a catalog directory.
type part struct {
	file string
	raw  rawCatalog
	doc  *document
}

// LintDir is Lint of the catalog directory dir: one catalog split over
// files, every *.yaml and *.yml directly in it (not in subdirectories), read
// in name order. Each file is a catalog document; their jobs: are concatenated, and each of the
// other top-level settings (cluster:, membership:, notify:, revision:,
// generation:) may be set in one file only. A job defined twice, in one file
// or two, and a setting set in two files, are refused with both locations.
// Every problem names the file, line and field (the field as in that file).
// TestDirMergesFiles and TestDirConflicts hold it.
func LintDir(dir string) (*Catalog, []Problem, error) {
	files, err := catalogFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	var parts []part
	var problems []Problem
	total := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, nil, fmt.Errorf("config: %w", err)
		}
		total += len(data)
		raw, doc, err := decode(file, data)
		var located *Error
		if errors.As(err, &located) {
			problems = append(problems, located.Problems...)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		parts = append(parts, part{file: file, raw: raw, doc: doc})
	}
	if total > MaxCatalogBytes {
		problems = append(problems, Problem{File: dir, Message: fmt.Sprintf("the catalog's files are %d bytes in all, over the limit of %d", total, MaxCatalogBytes)})
	}
	raw, locate, merged := merge(dir, parts)
	problems = append(problems, merged...)
	if len(problems) > 0 {
		return nil, nil, &Error{Problems: problems}
	}
	v := validator{locate: locate, now: time.Now()}
	return v.checked(v.catalog(raw))
}

// catalogFiles lists the *.yaml and *.yml files directly in dir, by name.
func catalogFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var files []string
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if (ext == ".yaml" || ext == ".yml") && !e.IsDir() {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, &Error{Problems: []Problem{{File: dir, Message: "the directory has no *.yaml or *.yml file: a catalog directory holds the catalog's files"}}}
	}
	return files, nil
}

// merge concatenates the parts' jobs and takes each setting from the one
// part that sets it; a setting set by two parts is a problem of the second.
func merge(dir string, parts []part) (rawCatalog, locator, []Problem) {
	var raw rawCatalog
	loc := locator{dir: dir}
	owner := map[string]int{} // setting → index in parts
	var problems []Problem
	for i, p := range parts {
		loc.parts = append(loc.parts, p)
		for _, key := range settings {
			line, col := p.doc.position(root(key))
			if line == 0 {
				continue
			}
			if first, dup := owner[key]; dup {
				problems = append(problems, Problem{File: p.file, Line: line, Column: col, Field: key,
					Message: fmt.Sprintf("%s is also set in %s: set each catalog setting in one file of the directory", key, loc.at(first, root(key)))})
				continue
			}
			owner[key] = i
			take(&raw, p.raw, key)
		}
		for k, j := range p.raw.Jobs {
			raw.Jobs = append(raw.Jobs, j)
			loc.jobs = append(loc.jobs, jobOrigin{part: i, index: k})
		}
	}
	loc.settings = owner
	return raw, loc, problems
}

// take copies the setting key of from into to.
func take(to *rawCatalog, from rawCatalog, key string) {
	switch key {
	case "revision":
		to.Revision = from.Revision
	case "generation":
		to.Generation = from.Generation
	case "cluster":
		to.Cluster = from.Cluster
	case "membership":
		to.Membership = from.Membership
	case "notify":
		to.Notify = from.Notify
	}
}

// locator finds a field of the catalog in its file: the one file of a
// catalog read from a file, or the part that a directory's job or setting
// came from.
type locator struct {
	dir      string // "" for a single file
	parts    []part
	jobs     []jobOrigin    // by index in the merged jobs:
	settings map[string]int // setting → part
}

type jobOrigin struct{ part, index int }

// locator returns the locator of a catalog read from one file.
func (d *document) locator(file string) locator {
	return locator{parts: []part{{file: file, doc: d}}}
}

// resolve returns the part a field of the merged catalog is in and the
// field's path in that part; part -1 when it is in none (a directory's
// missing jobs:, say).
func (l locator) resolve(p fieldPath) (int, fieldPath) {
	if l.dir == "" {
		return 0, p
	}
	if p[0].key == "jobs" {
		if len(p) < 2 || p[1].index >= len(l.jobs) {
			return -1, p
		}
		o := l.jobs[p[1].index]
		local := append(fieldPath{p[0], {index: o.index}}, p[2:]...)
		return o.part, local
	}
	if i, ok := l.settings[p[0].key]; ok {
		return i, p
	}
	return -1, p
}

// problem is a Problem at the field p of the merged catalog; without
// files (a catalog combined with stored jobs), at no position.
func (l locator) problem(p fieldPath, message string) Problem {
	if len(l.parts) == 0 && l.dir == "" {
		return Problem{Field: p.String(), Message: message}
	}
	i, local := l.resolve(p)
	if i < 0 {
		return Problem{File: l.dir, Field: p.String(), Message: message}
	}
	line, col := l.parts[i].doc.position(local)
	return Problem{File: l.parts[i].file, Line: line, Column: col, Field: local.String(), Message: message}
}

// where names the field p for a message about another field: by its path
// and line in a single file, by file:line:column and path in a directory.
func (l locator) where(p fieldPath) string {
	if l.dir == "" {
		line, _ := l.parts[0].doc.position(p)
		return fmt.Sprintf("%s, line %d", p, line)
	}
	i, local := l.resolve(p)
	if i < 0 {
		return p.String()
	}
	return l.at(i, local)
}

// at names the field p of part i as file:line:column (path).
func (l locator) at(i int, p fieldPath) string {
	line, col := l.parts[i].doc.position(p)
	return fmt.Sprintf("%s:%d:%d (%s)", l.parts[i].file, line, col, p)
}

// WhereJob names where the catalog file or directory at path defines job,
// as file:line, for a message about it (WholeOptions.Where); "" when it
// cannot tell (standard input, a file gone).
func WhereJob(path, job string) string {
	info, err := os.Stat(path)
	if err != nil {
		return ""
	}
	files := []string{path}
	if info.IsDir() {
		if files, err = catalogFiles(path); err != nil {
			return ""
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return ""
		}
		raw, doc, err := decode(f, data)
		if err != nil {
			continue
		}
		for i, rj := range raw.Jobs {
			if rj.Name == job {
				line, _ := doc.position(root("jobs").index(i).child("name"))
				return fmt.Sprintf("%s:%d", f, line)
			}
		}
	}
	return ""
}
