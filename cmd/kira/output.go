package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// output is the -o flag of every command that prints: table (for people),
// json or yaml (for programs: every field always present, the same names
// in both).
type output string

func (o *output) String() string { return string(*o) }
func (o *output) Type() string   { return "table|json|yaml" }
func (o *output) Set(s string) error {
	switch s {
	case "table", "json", "yaml":
		*o = output(s)
		return nil
	}
	return fmt.Errorf("must be table, json or yaml, not %q", s)
}

// register adds -o/--output to fs.
func (o *output) register(fs *pflag.FlagSet) {
	*o = "table"
	fs.VarP(o, "output", "o", "output format: table, json or yaml")
}

// print writes v as JSON or YAML, or calls table.
func (o output) print(w io.Writer, v any, table func(io.Writer) error) error {
	switch o {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return table(w)
}
