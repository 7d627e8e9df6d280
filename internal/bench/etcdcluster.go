package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kira-scheduler/kira/internal/etcdnode"
)

// EtcdCluster is the production shape's etcd: three `kira etcd` processes
// of the bench's binary as one cluster, with the defaults a user gets
// (fsync on, etcd's ticks, 5-minute compaction).
type EtcdCluster struct {
	Endpoints []string
	procs     []*memberProc
	metrics   []string // each member's /metrics URL
}

// StartEtcdCluster starts the three processes in dir and waits until the
// cluster serves.
func StartEtcdCluster(binary, dir string) (*EtcdCluster, error) {
	addrs, err := etcdnode.FreeAddrs(6)
	if err != nil {
		return nil, err
	}
	var clients, peers []string
	for i := 0; i < 3; i++ {
		clients, peers = append(clients, "http://"+addrs[2*i]), append(peers, "http://"+addrs[2*i+1])
	}
	var initial []string
	for i, p := range peers {
		initial = append(initial, fmt.Sprintf("e%d=%s", i, p))
	}
	c := &EtcdCluster{Endpoints: clients}
	for i := range clients {
		name := fmt.Sprintf("e%d", i)
		logPath := filepath.Join(dir, name+".log")
		log, err := os.Create(logPath)
		if err != nil {
			c.Stop()
			return nil, err
		}
		cmd := exec.Command(binary, "etcd", "--name", name, "--data-dir", filepath.Join(dir, name), "--listen-client-urls", clients[i],
			"--listen-peer-urls", peers[i], "--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", "kira-bench")
		cmd.Stdout, cmd.Stderr = log, log
		err = cmd.Start()
		log.Close()
		if err != nil {
			c.Stop()
			return nil, err
		}
		p := &memberProc{name: "etcd " + name, log: logPath, cmd: cmd, done: make(chan struct{})}
		go func() { cmd.Wait(); close(p.done) }()
		c.procs = append(c.procs, p)
		c.metrics = append(c.metrics, clients[i]+"/metrics")
	}
	err = waitProcs(c.procs, time.Minute, func(ctx context.Context) (bool, error) {
		for _, ep := range clients {
			resp, err := http.Get(ep + "/health")
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("bench: three kira etcd processes: %w", err)
	}
	return c, nil
}

// Stop ends the processes.
func (c *EtcdCluster) Stop() {
	for _, p := range c.procs {
		p.stop()
	}
}

// EtcdCost is what the etcd cluster paid during a window, per 1,000
// executions: the machine-independent figures of the production shape.
type EtcdCost struct {
	// CPUSeconds is the three processes' CPU time (user + system).
	CPUSeconds float64 `json:"cpu_seconds_per_1000_executions"`
	// DiskBytes is what the etcd processes wrote to disk (/proc's
	// write_bytes: the WAL and the backend); 0 for an etcd the bench did
	// not start. WALBytes is what their write-ahead logs took, from etcd's
	// own counter.
	DiskBytes float64 `json:"disk_bytes_written_per_1000_executions"`
	WALBytes  float64 `json:"wal_bytes_per_1000_executions"`
	// Keys is the keys put and deleted, Txns the transactions, as one
	// member counts them (every member applies each).
	Keys float64 `json:"keys_written_per_1000_executions"`
	Txns float64 `json:"transactions_per_1000_executions"`
	// DBBytes is the database size at the end of the window (the largest
	// member's).
	DBBytes float64 `json:"db_size_bytes"`
}

// Cores is how the machine's CPUs were shared during a window, in cores
// used (CPU seconds a second): what bounds the rate the production shape
// carries on one machine.
type Cores struct {
	Etcd    float64 `json:"etcd"`    // the three etcd processes
	Members float64 `json:"members"` // the three kira run processes
	// Bench is the bench's own process: mostly the HTTP receiver that
	// answers the job's requests, which a deployment would run elsewhere.
	Bench   float64 `json:"bench"`
	Machine int     `json:"machine"` // CPUs the machine has
}

// etcdReading is an etcd cluster's counters at one moment.
type etcdReading struct {
	cpu, disk, wal, keys, txns, db float64
}

// read reads the cluster's counters: CPU and disk from /proc, the rest
// from its members' /metrics.
func (c *EtcdCluster) read() etcdReading {
	r, _ := readMetrics(c.metrics)
	r.cpu = 0
	for _, p := range c.procs {
		cpu, disk := procUsage(p.cmd.Process.Pid)
		r.cpu, r.disk = r.cpu+cpu, r.disk+disk
	}
	return r
}

// readMetrics reads what an etcd cluster says of itself at the /metrics
// URLs of its members: CPU (its process collector) and WAL bytes summed
// over the members, keys, transactions and database size as one member
// counts them. ok is false when a member did not answer (with TLS, the
// bench does not read it).
func readMetrics(urls []string) (r etcdReading, ok bool) {
	for _, url := range urls {
		m := scrape(url)
		if len(m) == 0 {
			return r, false
		}
		r.cpu += m["process_cpu_seconds_total"]
		r.wal += m["etcd_disk_wal_write_bytes_total"]
		r.keys = max(r.keys, m["etcd_mvcc_put_total"]+m["etcd_mvcc_delete_total"])
		r.txns = max(r.txns, m["etcd_mvcc_txn_total"])
		r.db = max(r.db, m["etcd_mvcc_db_total_size_in_bytes"])
	}
	return r, len(urls) > 0
}

// cost is what the cluster paid between two readings for executions.
func cost(before, after etcdReading, executions int) *EtcdCost {
	if executions == 0 {
		return nil
	}
	per := 1000 / float64(executions)
	return &EtcdCost{CPUSeconds: (after.cpu - before.cpu) * per, DiskBytes: (after.disk - before.disk) * per, WALBytes: (after.wal - before.wal) * per,
		Keys: (after.keys - before.keys) * per, Txns: (after.txns - before.txns) * per, DBBytes: after.db}
}

// procUsage reads a process's CPU seconds and bytes written to disk from /proc.
func procUsage(pid int) (cpuSeconds, diskBytes float64) {
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// Fields after the command (which may hold spaces) start after ")".
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
			f := strings.Fields(string(stat)[i+1:])
			if len(f) > 12 {
				utime, _ := strconv.ParseFloat(f[11], 64)
				stime, _ := strconv.ParseFloat(f[12], 64)
				cpuSeconds = (utime + stime) / clockTicks
			}
		}
	}
	if io, err := os.Open(fmt.Sprintf("/proc/%d/io", pid)); err == nil {
		sc := bufio.NewScanner(io)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "write_bytes: "); ok {
				diskBytes, _ = strconv.ParseFloat(v, 64)
			}
		}
		io.Close()
	}
	return cpuSeconds, diskBytes
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times: 100
// on every Linux Go runs on.
const clockTicks = 100

// scrape reads the counters and gauges of a Prometheus text endpoint:
// each name summed over its labels, and each series under its name with
// its labels (see sumWith).
func scrape(url string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get(url)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
			bare, _, labelled := strings.Cut(name, "{")
			out[bare] += v
			if labelled {
				out[name] = v
			}
		}
	}
	return out
}

// sumWith is the sum of the series of metric name whose labels hold label
// (such as `outcome="failed"`), in what scrape read.
func sumWith(m map[string]float64, name, label string) float64 {
	total := 0.0
	for series, v := range m {
		if labels, ok := strings.CutPrefix(series, name+"{"); ok && strings.Contains(labels, label) {
			total += v
		}
	}
	return total
}
