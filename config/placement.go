package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Placement limits a job's slots to the members whose labels include every
// pair of Labels (kira run --label): the job's slots are split evenly over
// those members alone (shard.Assign).
type Placement struct {
	Labels map[string]string `json:"labels"`
}

type rawPlacement struct {
	Labels map[string]string `yaml:"labels"`
}

// labelKey and labelValue are Kubernetes' label syntax, without the
// optional prefix/: letters, digits, '-', '_' and '.', starting and ending
// with a letter or digit, at most 63 characters (a value may be empty).
var (
	labelKey   = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)
	labelValue = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$`)
)

// CheckLabel says what is wrong with a label key=value, or nil.
func CheckLabel(key, value string) error {
	if !labelKey.MatchString(key) {
		return fmt.Errorf("label key %q: use letters, digits, '-', '_' and '.', starting and ending with a letter or digit, at most 63 characters", key)
	}
	if !labelValue.MatchString(value) {
		return fmt.Errorf("label %s: value %q: use letters, digits, '-', '_' and '.', starting and ending with a letter or digit, at most 63 characters", key, value)
	}
	return nil
}

// String is the placement as key=value pairs, sorted.
func (p *Placement) String() string {
	if p == nil {
		return ""
	}
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(p.Labels)) {
		pairs = append(pairs, k+"="+p.Labels[k])
	}
	return strings.Join(pairs, ",")
}

// Selector is the labels a member needs to run the job (nil: any member).
func (j Job) Selector() map[string]string {
	if j.Placement == nil {
		return nil
	}
	return j.Placement.Labels
}

func (v *validator) placement(p fieldPath, raw *rawPlacement) *Placement {
	if raw == nil {
		return nil
	}
	if len(raw.Labels) == 0 {
		v.addf(p, "placement needs labels: the member labels (kira run --label key=value) a member must have to run the job")
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(raw.Labels)) {
		if err := CheckLabel(k, raw.Labels[k]); err != nil {
			v.addf(p.child("labels").child(k), "%v", err)
		}
	}
	return &Placement{Labels: raw.Labels}
}

// maxJobLabels bounds a job's labels.
const maxJobLabels = 64

// labels checks a job's labels: each in Kubernetes' syntax (CheckLabel),
// at most maxJobLabels (TestJobLabels).
func (v *validator) labels(p fieldPath, raw map[string]string) map[string]string {
	if len(raw) > maxJobLabels {
		v.addf(p, "%d labels, over the limit of %d", len(raw), maxJobLabels)
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if err := CheckLabel(k, raw[k]); err != nil {
			v.addf(p.child(k), "%v", err)
		}
	}
	if len(raw) == 0 {
		return nil
	}
	return raw
}
