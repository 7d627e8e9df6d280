package api

import (
	"maps"
	"net/http"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/internal/ops"
)

// Redacted stands for a value an anonymous reader is not shown.
const Redacted = "<redacted>"

// forReader is the job detail as the reader of r may see it: whole for an
// authenticated reader (always so with ProtectReads), else with its spec's
// secrets redacted (redactSpec).
func (s *server) forReader(r *http.Request, d *ops.JobDetail) *ops.JobDetail {
	if d == nil || s.cfg.Auth.authenticated(r) {
		return d
	}
	out := *d
	out.Spec = redactSpec(d.Spec)
	return &out
}

// redactSpec is j with every value that may hold a secret replaced by
// Redacted, each name kept: env values, the header values of its HTTP
// request and of its notify rules, and its notify rules' webhook URLs
// (TestAnonymousReadsAreRedacted). j itself is left unchanged.
func redactSpec(j config.Job) config.Job {
	j.Env = redactValues(j.Env)
	if j.HTTP != nil {
		h := *j.HTTP
		h.Headers = redactValues(h.Headers)
		j.HTTP = &h
	}
	if j.Notify != nil {
		rules := make([]config.NotifyRule, len(j.Notify))
		for i, n := range j.Notify {
			n.Webhook = Redacted
			n.Headers = redactValues(n.Headers)
			rules[i] = n
		}
		j.Notify = rules
	}
	return j
}

// redactValues is m with each value Redacted; nil for nil.
func redactValues(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := maps.Clone(m)
	for k := range out {
		out[k] = Redacted
	}
	return out
}
