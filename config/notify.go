package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// NotifyRule sends a job's executions that end in one of On to Webhook:
// one POST of a JSON document per execution (package notify). Webhook and
// header values may refer to the member's environment as ${NAME}.
type NotifyRule struct {
	On      []string          `json:"on"`
	Webhook string            `json:"webhook"`
	Headers map[string]string `json:"headers,omitempty"`
}

// NotifyOutcomes are the outcomes a rule's on: may name.
var NotifyOutcomes = []string{"succeeded", "failed", "timed_out", "cancelled", "fenced", "skipped", "missed"}

// MaxNotifyRules bounds the rules of a job (or of the catalog's default).
const MaxNotifyRules = 10

type rawNotify struct {
	On      []string          `yaml:"on"`
	Webhook string            `yaml:"webhook"`
	Headers map[string]string `yaml:"headers"`
}

// notify validates a notify: list at p; nil for none.
func (v *validator) notify(p fieldPath, raw []rawNotify) []NotifyRule {
	if len(raw) == 0 {
		return nil
	}
	if len(raw) > MaxNotifyRules {
		v.addf(p, "%d notify rules, over the limit of %d", len(raw), MaxNotifyRules)
	}
	out := []NotifyRule{}
	for i, r := range raw {
		rp := p.index(i)
		if len(r.On) == 0 {
			v.addf(rp, "on: is required: the outcomes to notify, such as [failed, timed_out, fenced, missed]")
		}
		for k, o := range r.On {
			if !slices.Contains(NotifyOutcomes, o) {
				v.addf(rp.child("on").index(k), "%q is not an outcome: use %s", o, strings.Join(NotifyOutcomes, ", "))
			}
		}
		v.request(rp, "webhook", r.Webhook, r.Headers, "webhook: is required: the URL each matching execution is POSTed to")
		out = append(out, NotifyRule{On: r.On, Webhook: r.Webhook, Headers: r.Headers})
	}
	return out
}

func rawNotifyOf(rules []NotifyRule) []rawNotify {
	out := []rawNotify{}
	for _, r := range rules {
		out = append(out, rawNotify{On: r.On, Webhook: r.Webhook, Headers: r.Headers})
	}
	return out
}

// resolveNotify sets the rules in force of j, a stored job, from the
// catalog's default def: those of a job marked NotifyDefault. A catalog
// stored by an older version (once false) copied the default into each job
// that had it; a copy equal to def is read as the default, as that
// version's Marshal wrote it back out (TestStoredNotifyCopiesReadAsTheDefault).
func resolveNotify(j *Job, def []NotifyRule, once bool) {
	switch {
	case j.NotifyDefault:
		j.Notify = def
	case !once && len(def) > 0 && reflect.DeepEqual(j.Notify, def):
		j.Notify, j.NotifyDefault = def, true
	}
}

// jobNotify describes j's notify rules for Diff: its own, or the default.
func jobNotify(j Job) string {
	if j.NotifyDefault {
		return "the catalog's default"
	}
	return notifyText(j.Notify)
}

// notifyChange is "a → b" for two descriptions of notify rules (jobNotify,
// notifyText), which show header names, not values (secrets as often as
// not): when only values changed, it says so.
func notifyChange(a, b string) string {
	if a == b {
		return a + " (header values changed)"
	}
	return a + " → " + b
}

// notifyText describes rules, their headers by name.
func notifyText(rules []NotifyRule) string {
	if len(rules) == 0 {
		return "none"
	}
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = fmt.Sprintf("on %v → %s", r.On, r.Webhook)
		if len(r.Headers) > 0 {
			out[i] += fmt.Sprintf(" (headers %s)", strings.Join(slices.Sorted(maps.Keys(r.Headers)), ", "))
		}
	}
	return "[" + strings.Join(out, "; ") + "]"
}
