package highwater

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// SaveEvery is how often Run writes a mark that rose to its file: a member
// that crashes forgets at most the revisions of its last SaveEvery.
const SaveEvery = time.Second

// FileName is the mark's file in a member's data directory.
const FileName = "kira-high-water.json"

// stored is the file's content.
type stored struct {
	ClusterID string `json:"cluster_id"` // hexadecimal, as etcdctl prints it
	Revision  int64  `json:"revision"`
}

// Load is a Mark kept in file, starting from what file holds (nothing if
// it does not exist yet). A file that does not parse is an error naming it.
func Load(file string, logger *slog.Logger) (*Mark, error) {
	m := New(logger)
	m.file = file
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("high-water mark: %w", err)
	}
	var s stored
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("high-water mark %s: %w (delete the file to start afresh; a restore without the revision bump would then go unnoticed)", file, err)
	}
	id, err := strconv.ParseUint(s.ClusterID, 16, 64)
	if err != nil || s.Revision < 0 {
		return nil, fmt.Errorf("high-water mark %s: cluster_id %q, revision %d: want a hexadecimal cluster id and a revision >= 0 (delete the file to start afresh)", file, s.ClusterID, s.Revision)
	}
	m.clusterID, m.high, m.saved = id, s.Revision, s.Revision
	return m, nil
}

// Run writes the mark to its file every SaveEvery when it rose, and once
// more when ctx ends. A Mark without a file does nothing.
func (m *Mark) Run(ctx context.Context) {
	if m.file == "" {
		return
	}
	tick := time.NewTicker(SaveEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			m.save()
			return
		case <-tick.C:
			m.save()
		}
	}
}

// save writes the mark if it rose since the last save, through a
// temporary file renamed over the old one, so a crash leaves one or the
// other.
func (m *Mark) save() {
	m.mu.Lock()
	s := stored{ClusterID: strconv.FormatUint(m.clusterID, 16), Revision: max(m.high, m.floor)}
	m.mu.Unlock()
	if s.Revision <= m.saved {
		return
	}
	data, _ := json.Marshal(s)
	tmp := filepath.Join(filepath.Dir(m.file), "."+filepath.Base(m.file)+".tmp")
	err := os.WriteFile(tmp, append(data, '\n'), 0o600)
	if err == nil {
		err = os.Rename(tmp, m.file)
	}
	if err != nil {
		if !m.failing { // once, not every SaveEvery (a full disk)
			m.logger.Warn("could not save the high-water mark; a restart would forget the revisions seen since the last save", "file", m.file, "saved", m.saved, "err", err)
		}
		m.failing = true
		return
	}
	m.saved, m.failing = s.Revision, false
}
