package config

import (
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
