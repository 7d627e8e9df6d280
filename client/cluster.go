package client

import (
	"context"
	"net/http"
	"time"

	"github.com/kira-scheduler/kira/config"
)

// Status answers GET /v1/status: the cluster's members and slots at one
// etcd revision, as kira status -o json prints them.
type Status struct {
	Cluster  string `json:"cluster"`
	Revision int64  `json:"revision"`
	// CatalogRevision is the stored catalog's; each member's record says
	// which it runs.
	CatalogRevision int64 `json:"catalog_revision"`
	// CatalogSource says how and when the stored catalog was stored; nil
	// when not recorded.
	CatalogSource *config.Source `json:"catalog_source"`
	Paused        []string       `json:"paused"`
	Members       []MemberRecord `json:"members"`
	// Slots are sorted by job, then partition.
	Slots []SlotStatus `json:"slots"`
	// Unplaced are the jobs whose placement matches no member.
	Unplaced []string `json:"unplaced"`
	// Shares are, per job, how many of its slots each member leads.
	Shares []JobShares `json:"shares"`
}

// MemberRecord is what a member publishes about itself.
type MemberRecord struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Host      string    `json:"host"`
	HTTP      string    `json:"http"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
	// CatalogRevision is the catalog the member runs (0: a local file).
	CatalogRevision int64             `json:"catalog_revision"`
	Labels          map[string]string `json:"labels"`
	// HistoryFormat is the newest format of stored history the member reads.
	HistoryFormat int `json:"history_format,omitempty"`
	// CatalogFileNotStored, when set, says why the member's --catalog file
	// was not stored and how to apply it.
	CatalogFileNotStored string `json:"catalog_file_not_stored,omitempty"`
}

// SlotStatus is one slot: its owner (the holder of its election; "" when
// nobody holds it) and its fencing token (0 then).
type SlotStatus struct {
	Job       string `json:"job"`
	Partition int    `json:"partition"`
	Owner     string `json:"owner"`
	Token     int64  `json:"token"`
}

// JobShares is one job's split over the members.
type JobShares struct {
	Job    string  `json:"job"`
	Shares []Share `json:"shares"`
}

// Share is how many of one job's slots a member leads.
type Share struct {
	Member string `json:"member"` // the member's id
	Name   string `json:"name"`   // its --name, or ""
	Slots  int    `json:"slots"`
}

// Member answers one entry of GET /v1/members: a live member, the slots
// it leads, and its lease as etcd counts it.
type Member struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	Host            string            `json:"host"`
	Version         string            `json:"version"`
	StartedAt       time.Time         `json:"started_at"`
	CatalogRevision int64             `json:"catalog_revision"`
	Labels          map[string]string `json:"labels"`
	// SlotsLed of the cluster's Slots.
	SlotsLed int         `json:"slots_led"`
	Slots    int         `json:"slots"`
	Jobs     []MemberJob `json:"jobs"`
	// LeaseTTLSeconds is the lease as granted, LeaseLeftSeconds how long
	// etcd keeps it without a renewal, LastSeen the last renewal; all nil
	// when the member did not serve the lease (or it expired as asked).
	LeaseTTLSeconds  *int64     `json:"lease_ttl_seconds"`
	LeaseLeftSeconds *int64     `json:"lease_left_seconds"`
	LastSeen         *time.Time `json:"last_seen"`
	// LastFailover is the member's part in the cluster's last failover,
	// nil if it took over none of the departed member's slots.
	LastFailover *Takeover `json:"last_failover"`
}

// MemberJob is how many of a job's slots a member leads.
type MemberJob struct {
	Job        string `json:"job"`
	Slots      int    `json:"slots"`
	Partitions int    `json:"partitions"`
}

// Takeover is a member's part in a failover: of Of slots the departed
// member Left held, it took over Slots, first acting on them At.
type Takeover struct {
	Left           string    `json:"left"`
	LeftLastRecord time.Time `json:"left_last_record"`
	Slots          int       `json:"slots"`
	Of             int       `json:"of"`
	At             time.Time `json:"at"`
	LedMost        bool      `json:"led_most"`
}

// HealthProblem is one thing wrong with the cluster (GET /v1/health):
// what and what to do, in a sentence.
type HealthProblem struct {
	// Kind is leaderless, catalog_revision, unplaced, etcd_alarm,
	// two_leaders or members_unread.
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// Status reads the cluster's members, slots and catalog source
// (GET /v1/status).
func (c *Client) Status(ctx context.Context) (*Status, error) {
	return call[*Status](ctx, c, http.MethodGet, "/v1/status", nil, nil)
}

// Members reads each live member with its slots and lease
// (GET /v1/members).
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	return call[[]Member](ctx, c, http.MethodGet, "/v1/members", nil, nil)
}

// Health reads what is wrong with the cluster and what to do; none is
// an empty list (GET /v1/health).
func (c *Client) Health(ctx context.Context) ([]HealthProblem, error) {
	return call[[]HealthProblem](ctx, c, http.MethodGet, "/v1/health", nil, nil)
}
