package config

import (
	"math"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// The jobs: list of a large catalog is decoded here rather than by the YAML
// library's reflection, which cost more than parsing the file
// (docs/benchmarks.md, "Many jobs"). The library stays the reference: a job
// this file cannot read exactly as the library does makes the whole
// document go through the library, so its result and its errors are the
// library's (TestDecodeJobsAgreesWithTheLibrary, FuzzDecodeJobs).

// decodeSplit decodes body (a document's top node) into raw with its jobs:
// read by decodeJobs and the rest by the library; ok is false, and raw
// untouched, when decodeJobs cannot read the jobs or the rest is not a
// plain mapping.
func decodeSplit(body ast.Node, raw *rawCatalog) (ok bool, err error) {
	m, isMap := body.(*ast.MappingNode)
	if !isMap {
		return false, nil
	}
	rest, value, ok := withoutJobs(m)
	seq, isSeq := value.(*ast.SequenceNode)
	if !ok || !isSeq {
		return false, nil
	}
	jobs, ok := decodeJobs(seq)
	if !ok {
		return false, nil
	}
	var out rawCatalog
	if err := yaml.NodeToValue(rest, &out, yaml.DisallowUnknownField()); err != nil {
		return true, err
	}
	out.Jobs = jobs
	*raw = out
	return true, nil
}

// withoutJobs is mapping m without its jobs: key, and that key's value
// (nil without one); ok is false when a key is not a plain string or jobs:
// is there twice. decodeSplit and decodeRest (pieces.go) share it.
func withoutJobs(m *ast.MappingNode) (rest *ast.MappingNode, jobs ast.Node, ok bool) {
	r := *m
	r.Values = make([]*ast.MappingValueNode, 0, len(m.Values))
	seen := false
	for _, kv := range m.Values {
		key, isString := kv.Key.(*ast.StringNode)
		switch {
		case !isString:
			return nil, nil, false
		case key.Value != "jobs":
			r.Values = append(r.Values, kv)
		case seen:
			return nil, nil, false
		default:
			jobs, seen = kv.Value, true
		}
	}
	return &r, jobs, true
}

// decodeJobs reads seq, a jobs: list, as the library would decode it into
// []rawJob; ok is false for any job it cannot read so: not a mapping, or a
// key that is not a known field or is repeated, or a value other than a
// plain string, integer, list or map of strings, or a nested field the
// library refuses or whose tree has an anchor, alias, tag or merge key.
func decodeJobs(seq *ast.SequenceNode) (jobs []rawJob, ok bool) {
	jobs = make([]rawJob, len(seq.Values))
	for i, n := range seq.Values {
		m, isMap := n.(*ast.MappingNode)
		if !isMap || !decodeJob(m, &jobs[i]) {
			return nil, false
		}
	}
	return jobs, true
}

// decodeJob reads one job's mapping into j, as decodeJobs says.
func decodeJob(m *ast.MappingNode, j *rawJob) bool {
	seen := make([]string, 0, len(m.Values))
	for _, kv := range m.Values {
		k, isString := kv.Key.(*ast.StringNode)
		if !isString {
			return false
		}
		for _, s := range seen {
			if s == k.Value {
				return false
			}
		}
		seen = append(seen, k.Value)
		if !decodeField(j, k.Value, kv.Value) {
			return false
		}
	}
	return true
}

// decodeField sets j's field named key (its yaml tag in rawJob) from v.
func decodeField(j *rawJob, key string, v ast.Node) bool {
	switch key {
	case "name":
		return plainString(v, &j.Name)
	case "schedule":
		return plainString(v, &j.Schedule)
	case "timeout":
		return plainString(v, &j.Timeout)
	case "handler":
		return plainString(v, &j.Handler)
	case "fence_url":
		return plainString(v, &j.FenceURL)
	case "misfire":
		return plainString(v, &j.Misfire)
	case "catchup_window":
		return plainString(v, &j.CatchupWindow)
	case "overlap":
		return plainString(v, &j.Overlap)
	case "jitter":
		return plainString(v, &j.Jitter)
	case "timezone":
		return plainString(v, &j.Timezone)
	case "pool":
		return plainString(v, &j.Pool)
	case "partitions":
		return plainInt(v, &j.Partitions)
	case "history_limit":
		return plainInt(v, &j.HistoryLimit)
	case "max_running":
		return plainInt(v, &j.MaxRunning)
	case "command":
		return plainStrings(v, &j.Command)
	case "fence_command":
		return plainStrings(v, &j.FenceCommand)
	case "pass_env":
		return plainStrings(v, &j.PassEnv)
	case "env":
		return plainStringMap(v, &j.Env)
	case "labels":
		return plainStringMap(v, &j.Labels)
	case "http":
		return nestedPtr(v, &j.HTTP)
	case "retries":
		return nestedPtr(v, &j.Retries)
	case "notify":
		return nestedPtr(v, &j.Notify)
	case "placement":
		return nestedPtr(v, &j.Placement)
	case "after":
		return nested(v, &j.After)
	}
	return false
}

func plainString(v ast.Node, dst *string) bool {
	s, ok := v.(*ast.StringNode)
	if ok {
		*dst = s.Value
	}
	return ok
}

func plainInt(v ast.Node, dst **int) bool {
	n, ok := v.(*ast.IntegerNode)
	if !ok {
		return false
	}
	var x int
	switch i := n.Value.(type) {
	case int64:
		if int64(int(i)) != i {
			return false
		}
		x = int(i)
	case uint64:
		if i > math.MaxInt {
			return false
		}
		x = int(i)
	default:
		return false
	}
	*dst = &x
	return true
}

func plainStrings(v ast.Node, dst *[]string) bool {
	seq, ok := v.(*ast.SequenceNode)
	if !ok {
		return false
	}
	out := make([]string, 0, len(seq.Values))
	for _, e := range seq.Values {
		s, ok := e.(*ast.StringNode)
		if !ok {
			return false
		}
		out = append(out, s.Value)
	}
	*dst = out
	return true
}

func plainStringMap(v ast.Node, dst *map[string]string) bool {
	m, ok := v.(*ast.MappingNode)
	if !ok {
		return false
	}
	out := make(map[string]string, len(m.Values))
	for _, kv := range m.Values {
		k, kok := kv.Key.(*ast.StringNode)
		s, vok := kv.Value.(*ast.StringNode)
		if !kok || !vok {
			return false
		}
		if _, dup := out[k.Value]; dup {
			return false
		}
		out[k.Value] = s.Value
	}
	*dst = out
	return true
}

// nested decodes v into dst with the library, when v's tree refers to
// nothing outside itself (no anchor, alias, tag or merge key) and is not
// null, which the library decodes differently at the top.
func nested[T any](v ast.Node, dst *T) bool {
	if _, null := v.(*ast.NullNode); null || !selfContained(v) {
		return false
	}
	var out T
	if yaml.NodeToValue(v, &out, yaml.DisallowUnknownField()) != nil {
		return false
	}
	*dst = out
	return true
}

// nestedPtr is nested for a pointer field, which the library leaves nil
// when asked to decode into it at the top.
func nestedPtr[T any](v ast.Node, dst **T) bool {
	var out T
	if !nested(v, &out) {
		return false
	}
	*dst = &out
	return true
}

// selfContained reports whether n's tree has no anchor, alias, tag or
// merge key, whose meaning depends on the rest of the document.
func selfContained(n ast.Node) bool {
	c := containment{ok: true}
	ast.Walk(&c, n)
	return c.ok
}

type containment struct{ ok bool }

func (c *containment) Visit(n ast.Node) ast.Visitor {
	switch n.(type) {
	case *ast.AnchorNode, *ast.AliasNode, *ast.TagNode, *ast.MergeKeyNode:
		c.ok = false
	}
	if !c.ok {
		return nil
	}
	return c
}
