package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envAnnotation names a flag's variable when it is not the rule's.
const envAnnotation = "kira_env"

// envName is the variable that sets a flag of cmd: KIRA_<FLAG> for a global
// flag, KIRA_<COMMAND>_<FLAG> for a command's own (so that no variable of
// one command changes another's flag of the same name, and none is a fact
// Kira gives its jobs, such as KIRA_PARTITION), or the flag's annotation.
func envName(cmd *cobra.Command, f *pflag.Flag) string {
	if env := f.Annotations[envAnnotation]; len(env) == 1 {
		return env[0]
	}
	name := strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
	if cmd.InheritedFlags().Lookup(f.Name) == f || !cmd.HasParent() {
		return "KIRA_" + name
	}
	return "KIRA_" + strings.ToUpper(cmd.Name()) + "_" + name
}

// flagsFromEnv sets every flag of cmd that the command line did not from
// its variable, if set. A bad value names the variable.
func flagsFromEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" || f.Name == "version" {
			return
		}
		env := envName(cmd, f)
		v, ok := os.LookupEnv(env)
		if !ok {
			return
		}
		if e := cmd.Flags().Set(f.Name, v); e != nil {
			err = fmt.Errorf("kira %s: $%s: %w", cmd.Name(), env, e)
		}
	})
	return err
}
