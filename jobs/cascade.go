package jobs

import (
	"strings"
	"time"
)

// cascadePrefix starts the id of a manual run that cascades (kira trigger
// --cascade): its dependents (after:) fire after it, as after a scheduled
// fire.
const cascadePrefix = "cascade-"

// CascadeExecutionID identifies the cascading manual run of (job,
// partition) requested by the control key created at revision rev: as
// ManualExecutionID, under its own prefix, so a dependent knows from the
// run's record that it fires after it.
func CascadeExecutionID(job string, partition int, rev int64) string {
	return cascadePrefix + ExecutionID(job+"/manual", partition, time.Unix(0, rev))
}

// Cascades reports whether id is a cascading manual run's.
func Cascades(id string) bool { return strings.HasPrefix(id, cascadePrefix) }
