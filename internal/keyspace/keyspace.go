// Package keyspace is the one place that spells Kira's etcd keys. Every key
// of a cluster lives under /kira/<cluster>/:
//
//	members/<member id>                        member record          member's lease
//	catalog                                    the stored catalog     none
//	catalog-source                             who stored it (config.Source), written with it  none
//	catalog-head                               the per-job catalog's generation  none
//	catalogs/<generation>/settings             its settings           none
//	catalogs/<generation>/jobs/<job>           one of its jobs        none
//	catalogs/<generation>/refs/<up>/<dep>      job dep runs after up  none
//	catalog-change                             the last single-job change  none
//	catalog-generations                        names new generations  none
//	election/<job>/<partition>/<lease id hex>  candidacy (concurrency.Election)  member's lease
//	state/<job>/<partition>                    the slot's state       none, fenced writes
//	history/<job>/<partition>/<seq mod limit>  execution records      none, fenced writes
//	journal/<member id>/<n mod size>           a member's records of many slots  none, fenced writes
//	control/<job>/paused                       exists while paused    none
//	control/<job>/trigger/<partition>/<uuid>   a manual run request   none
//	pools/<pool>/<lease id hex>-<n hex>       a run's permit, held or awaited  member's lease
//
// A slot's leader is the oldest key of its election; that key's create
// revision is the slot's fencing token. Fenced writes compare it in the same
// transaction. The values are JSON; their types live with their writers
// (member.Record, config.Catalog, the scheduler's records).
package keyspace

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kira-scheduler/kira/internal/shard"
)

// Cluster is the root of a cluster's keys.
func Cluster(cluster string) string { return "/kira/" + cluster + "/" }

// Members is where member records live, one key per member under its lease.
func Members(cluster string) string { return Cluster(cluster) + "members/" }

// Member is one member's record.
func Member(cluster, id string) string { return Members(cluster) + id }

// Catalog is the stored catalog; its mod revision is the catalog revision.
func Catalog(cluster string) string { return Cluster(cluster) + "catalog" }

// CatalogSource records how the catalog was stored; it is written in the
// catalog's transaction, so it describes the catalog only when its mod
// revision is the catalog's.
func CatalogSource(cluster string) string { return Cluster(cluster) + "catalog-source" }

// CatalogPrefix covers every key of the stored catalog, in either layout:
// members watch it.
func CatalogPrefix(cluster string) string { return Catalog(cluster) }

// CatalogHead names the generation of the per-job catalog; its mod
// revision is the catalog revision.
func CatalogHead(cluster string) string { return Cluster(cluster) + "catalog-head" }

// CatalogGenerations is put to name a new generation: the put's revision.
func CatalogGenerations(cluster string) string { return Cluster(cluster) + "catalog-generations" }

// CatalogGenerationsRoot is the root of every generation of the per-job catalog.
func CatalogGenerationsRoot(cluster string) string { return Cluster(cluster) + "catalogs/" }

// CatalogGeneration is the prefix of one generation; generations sort by number.
func CatalogGeneration(cluster string, g int64) string {
	return fmt.Sprintf("%s%016x/", CatalogGenerationsRoot(cluster), g)
}

// CatalogSettings is a generation's settings.
func CatalogSettings(cluster string, g int64) string {
	return CatalogGeneration(cluster, g) + "settings"
}

// CatalogJobs is the prefix of a generation's jobs.
func CatalogJobs(cluster string, g int64) string { return CatalogGeneration(cluster, g) + "jobs/" }

// CatalogJob is one job of a generation.
func CatalogJob(cluster string, g int64, job string) string { return CatalogJobs(cluster, g) + job }

// CatalogRefs is the prefix of the references to job upstream in a
// generation: one key per job that runs after it (after:), so that a delete
// of upstream can be refused, in the transaction that deletes it, while one
// exists (config.DeleteJob).
func CatalogRefs(cluster string, g int64, upstream string) string {
	return CatalogGeneration(cluster, g) + "refs/" + upstream + "/"
}

// CatalogRef is the reference of job dependent to its upstream.
func CatalogRef(cluster string, g int64, upstream, dependent string) string {
	return CatalogRefs(cluster, g, upstream) + dependent
}

// IsCatalogRef reports whether key is a reference key (CatalogRef) of a
// generation.
func IsCatalogRef(cluster, key string) bool {
	rest, found := strings.CutPrefix(key, CatalogGenerationsRoot(cluster))
	return found && len(rest) > 17 && rest[16] == '/' && strings.HasPrefix(rest[17:], "refs/")
}

// CatalogChange records the last single-job change of the catalog (who, which
// job, what); written in that change's transaction, it describes the
// catalog revision its mod revision is.
func CatalogChange(cluster string) string { return Cluster(cluster) + "catalog-change" }

// ParseCatalogKey reads the generation of a key under CatalogGenerationsRoot
// and the job it holds ("" for its settings); false for any other key, the
// reference keys (CatalogRef) among them.
func ParseCatalogKey(cluster, key string) (g int64, job string, ok bool) {
	rest, found := strings.CutPrefix(key, CatalogGenerationsRoot(cluster))
	if !found || len(rest) < 17 || rest[16] != '/' {
		return 0, "", false
	}
	g, err := strconv.ParseInt(rest[:16], 16, 64)
	if err != nil {
		return 0, "", false
	}
	switch rest = rest[17:]; {
	case rest == "settings":
		return g, "", true
	case strings.HasPrefix(rest, "jobs/") && len(rest) > len("jobs/"):
		return g, rest[len("jobs/"):], true
	}
	return 0, "", false
}

// Elections is the root of every slot's election.
func Elections(cluster string) string { return Cluster(cluster) + "election/" }

// JobElections is the prefix of the elections of every slot of job.
func JobElections(cluster, job string) string { return Elections(cluster) + job + "/" }

// Election is the prefix of one slot's election (concurrency.Election's
// prefix, without the trailing slash it adds).
func Election(cluster string, s shard.Slot) string { return Elections(cluster) + s.String() }

// Candidacy is the election key of the member whose lease is lease.
func Candidacy(cluster string, s shard.Slot, lease int64) string {
	return CandidacyIn(Election(cluster, s), lease)
}

// CandidacyIn is the key the member whose lease is lease stands under in
// the election of prefix, as concurrency.Election names it.
func CandidacyIn(prefix string, lease int64) string { return fmt.Sprintf("%s/%x", prefix, lease) }

// ParseCandidacy splits a key under Elections into its slot and lease (hex).
func ParseCandidacy(cluster, key string) (s shard.Slot, lease string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(key, Elections(cluster)), "/")
	if len(parts) != 3 || !strings.HasPrefix(key, Elections(cluster)) {
		return shard.Slot{}, "", false
	}
	p, ok := partition(parts[1])
	if !ok {
		return shard.Slot{}, "", false
	}
	return shard.Slot{Job: parts[0], Partition: p}, parts[2], true
}

// partition reads a partition number as Kira spells it: decimal, no sign,
// no leading zeros. Any other spelling was not written by Kira, and would
// name a key that the slot's own prefix does not cover.
func partition(s string) (int, bool) {
	p, err := strconv.Atoi(s)
	return p, err == nil && p >= 0 && strconv.Itoa(p) == s
}

// States is the root of every slot's state key.
func States(cluster string) string { return Cluster(cluster) + "state/" }

// JobStates is the prefix of the state keys of every slot of job.
func JobStates(cluster, job string) string { return States(cluster) + job + "/" }

// State is where a slot's state lives.
func State(cluster string, s shard.Slot) string { return States(cluster) + s.String() }

// ParseState reads the slot of a state key; false for a key Kira did not
// write there.
func ParseState(cluster, key string) (shard.Slot, bool) {
	parts := strings.Split(strings.TrimPrefix(key, States(cluster)), "/")
	if len(parts) != 2 || !strings.HasPrefix(key, States(cluster)) || parts[0] == "" {
		return shard.Slot{}, false
	}
	p, ok := partition(parts[1])
	return shard.Slot{Job: parts[0], Partition: p}, ok
}

// History is where a job's execution records live.
func History(cluster, job string) string { return Cluster(cluster) + "history/" + job + "/" }

// SlotHistory is where one slot's execution records live.
func SlotHistory(cluster string, s shard.Slot) string {
	return fmt.Sprintf("%s%d/", History(cluster, s.Job), s.Partition)
}

// HistoryEntry is where the record with sequence number seq goes: a slot's
// records are a ring of limit keys, so the oldest is overwritten, never
// accumulated.
func HistoryEntry(cluster string, s shard.Slot, seq int64, limit int) string {
	return historyEntry(cluster, s, seq%int64(limit))
}

// HistoryBeyond is the first key of a slot's history past a ring of limit
// keys: the records from there on are left over from a larger limit.
func HistoryBeyond(cluster string, s shard.Slot, limit int) string {
	return historyEntry(cluster, s, int64(limit))
}

// ParseHistoryEntry reads the slot of a key under a cluster's history;
// false for a key Kira did not write there.
func ParseHistoryEntry(cluster, key string) (shard.Slot, bool) {
	root := Cluster(cluster) + "history/"
	parts := strings.Split(strings.TrimPrefix(key, root), "/")
	if len(parts) != 3 || !strings.HasPrefix(key, root) || parts[2] == "" || strings.Trim(parts[2], "0123456789") != "" {
		return shard.Slot{}, false
	}
	p, ok := partition(parts[1])
	return shard.Slot{Job: parts[0], Partition: p}, ok
}

func historyEntry(cluster string, s shard.Slot, i int64) string {
	return fmt.Sprintf("%s%03d", SlotHistory(cluster, s), i)
}

// Journals is the root of every member's journal.
func Journals(cluster string) string { return Cluster(cluster) + "journal/" }

// Journal is the prefix of one member's journal.
func Journal(cluster, member string) string { return Journals(cluster) + member + "/" }

// JournalEntry is entry n of a member's journal: a ring of keys, each
// holding the records of one of its fenced transactions.
func JournalEntry(cluster, member string, n int) string {
	return fmt.Sprintf("%s%04d", Journal(cluster, member), n)
}

// ParseJournalEntry reads the member of a key under Journals; false for a
// key Kira did not write there.
func ParseJournalEntry(cluster, key string) (member string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(key, Journals(cluster)), "/")
	if len(parts) != 2 || !strings.HasPrefix(key, Journals(cluster)) || parts[0] == "" || parts[1] == "" || strings.Trim(parts[1], "0123456789") != "" {
		return "", false
	}
	return parts[0], true
}

// Control is the root of a cluster's control keys.
func Control(cluster string) string { return Cluster(cluster) + "control/" }

// JobControl is the prefix of job's control keys: its pause and its
// manual run requests.
func JobControl(cluster, job string) string { return Control(cluster) + job + "/" }

// Paused exists while a job is paused.
func Paused(cluster, job string) string { return Control(cluster) + job + "/paused" }

// Triggers is where a slot's manual run requests wait.
func Triggers(cluster string, s shard.Slot) string {
	return fmt.Sprintf("%s%s/trigger/%d/", Control(cluster), s.Job, s.Partition)
}

// ControlKey is a parsed control key: a job's pause, or a manual run request
// of one of its partitions.
type ControlKey struct {
	Job       string
	Partition int  // a trigger's
	Trigger   bool // false: the job's paused key
}

// ParseControl reads a key under Control; ok is false for any other key.
func ParseControl(cluster, key string) (ControlKey, bool) {
	rel, found := strings.CutPrefix(key, Control(cluster))
	if !found {
		return ControlKey{}, false
	}
	parts := strings.Split(rel, "/")
	switch {
	case len(parts) == 2 && parts[1] == "paused" && parts[0] != "":
		return ControlKey{Job: parts[0]}, true
	case len(parts) == 4 && parts[1] == "trigger" && parts[0] != "" && parts[3] != "":
		p, ok := partition(parts[2])
		if !ok {
			return ControlKey{}, false
		}
		return ControlKey{Job: parts[0], Partition: p, Trigger: true}, true
	}
	return ControlKey{}, false
}

// Pools is the root of every concurrency limit's permits.
func Pools(cluster string) string { return Cluster(cluster) + "pools/" }

// Pool is the prefix of one limit's permits; pool is config.Limit's Pool
// ("pool/<name>" or "job/<name>"), so a catalog pool and a job's own limit
// never share a prefix.
func Pool(cluster, pool string) string { return Pools(cluster) + pool + "/" }

// Permit is the key of the n-th permit a member (by its lease) asks of a pool.
func Permit(cluster, pool string, lease int64, n uint64) string {
	return fmt.Sprintf("%s%x-%x", Pool(cluster, pool), lease, n)
}
