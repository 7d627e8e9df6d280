package config

import (
	"fmt"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
)

// A single-job write's body is one job in YAML or JSON (which YAML reads),
// the schema of one entry of a catalog's jobs:, checked by the catalog's
// validator: its problems name the line and field (schedule, not
// jobs[0].schedule). The body may leave out name:, which the write's name
// fills; a name: that differs is refused (TestPutJobBody).

// decodeJob reads data, a job's body, as rawJob, with its document for
// locating problems; name fills an absent name:.
func decodeJobBody(file, name string, data []byte) (rj rawJob, doc *document, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Problems: []Problem{{File: file, Message: fmt.Sprintf("the body cannot be read (the parser failed: %v)", r)}}}
		}
	}()
	if len(data) > MaxTxnBytes {
		return rj, nil, &Error{Problems: []Problem{{File: file, Message: fmt.Sprintf("the body is %d bytes, over the limit of %d for one job", len(data), MaxTxnBytes)}}}
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return rj, nil, yamlError(file, err)
	}
	if len(f.Docs) != 1 || f.Docs[0].Body == nil {
		return rj, nil, &Error{Problems: []Problem{{File: file, Message: "the body is not one job: write one mapping, as one entry of a catalog's jobs:"}}}
	}
	if err := yaml.NodeToValue(f.Docs[0].Body, &rj, yaml.DisallowUnknownField()); err != nil {
		return rj, nil, yamlError(file, err)
	}
	doc = &document{file: f}
	switch {
	case rj.Name == "":
		rj.Name = name
	case rj.Name != name:
		p := doc.locator(file).problem(fieldPath{{key: "name"}}, fmt.Sprintf("the body names job %q, the write job %q: leave name: out, or make them the same", rj.Name, name))
		return rj, nil, &Error{Problems: []Problem{p}}
	}
	return rj, doc, nil
}

// validJob validates rj, a job's body, as the catalog's validator does a
// job of its jobs: under the stored settings sets (its pools, its notify
// default); the rules across jobs are the write's (job.go).
func validJob(file string, rj rawJob, doc *document, sets storedSettings) (Job, error) {
	v := validator{locate: doc.locator(file)}
	jp := fieldPath{}
	j := v.job(jp, rj)
	v.limit(jp, rj, &j, sets.Pools)
	if rj.Notify == nil && len(sets.Notify) > 0 {
		j.Notify, j.NotifyDefault = sets.Notify, true
	}
	if len(v.problems) > 0 {
		return Job{}, &Error{Problems: v.problems}
	}
	return j, nil
}
