package scheduler

import (
	"strings"
	"testing"
	"time"
)

// A negative duration or count is refused by name where it enters, before
// New touches anything; zero means the default.
func TestConfigRefusesNegativeSettings(t *testing.T) {
	if err := (&Config{}).Validate(); err != nil {
		t.Fatalf("the zero Config: %v", err)
	}
	for name, cfg := range map[string]Config{
		"grace":            {Grace: -time.Second},
		"arm ahead":        {ArmAhead: -time.Millisecond},
		"journal sweep":    {JournalSweep: -time.Minute},
		"job sweep":        {JobSweep: -time.Minute},
		"journal entries":  {JournalEntries: -1},
		"catalog revision": {CatalogRevision: -5},
	} {
		_, err := New(nil, nil, nil, cfg)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s negative: New answered %v; want an error naming it", name, err)
		}
	}
}
