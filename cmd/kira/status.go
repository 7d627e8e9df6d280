package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kira-scheduler/kira/config"
	"github.com/kira-scheduler/kira/membership"
	"github.com/kira-scheduler/kira/scheduler"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Status is what kira status prints; its JSON form is a contract.
type Status struct {
	Cluster  string `json:"cluster"`
	Revision int64  `json:"revision"`
	// CatalogRevision is the stored catalog's; each member's record says which it runs.
	CatalogRevision int64               `json:"catalog_revision"`
	Paused          []string            `json:"paused"`
	Members         []membership.Record `json:"members"`
	Slots           []SlotStatus        `json:"slots"`
}

// SlotStatus is one slot: its owner is the member whose election key is
// oldest; its token is that key's create revision. Owner is "" and token 0
// when nobody holds it.
type SlotStatus struct {
	Job       string `json:"job"`
	Partition int    `json:"partition"`
	Owner     string `json:"owner"`
	Token     int64  `json:"token"`
}

func statusCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clusterFlags
	cf.register(fs)
	etcd, cluster := &cf.etcd, &cf.cluster
	output := fs.String("o", "table", "output format: table or json")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "kira status: -o must be table or json, got %q\n", *output)
		return errUsage
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: splitList(*etcd), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("kira status: %w", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := readStatus(ctx, cli, *cluster)
	if err != nil {
		return fmt.Errorf("kira status: %w", cf.unreachable(err))
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	printStatus(stdout, st)
	return nil
}

// readStatus reads members, elections and the catalog in one transaction, so
// the answer is one consistent snapshot at one revision.
func readStatus(ctx context.Context, cli *clientv3.Client, cluster string) (*Status, error) {
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpGet(membership.MembersPrefix(cluster), clientv3.WithPrefix()),
		clientv3.OpGet(scheduler.ElectionPrefix(cluster), clientv3.WithPrefix()),
		clientv3.OpGet(config.StoreKey(cluster)),
		clientv3.OpGet(scheduler.ControlPrefix(cluster), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return nil, err
	}
	st := &Status{Cluster: cluster, Revision: resp.Header.Revision, Members: []membership.Record{}, Slots: []SlotStatus{}, Paused: []string{}}
	for _, kv := range resp.Responses[3].GetResponseRange().Kvs {
		if job, ok := strings.CutSuffix(strings.TrimPrefix(string(kv.Key), scheduler.ControlPrefix(cluster)), "/paused"); ok {
			st.Paused = append(st.Paused, job)
		}
	}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		var rec membership.Record
		if json.Unmarshal(kv.Value, &rec) != nil || rec.ID == "" {
			rec.ID = strings.TrimPrefix(string(kv.Key), membership.MembersPrefix(cluster))
		}
		st.Members = append(st.Members, rec)
	}
	slots := map[[2]string]*SlotStatus{}
	slot := func(job string, partition int) *SlotStatus {
		k := [2]string{job, strconv.Itoa(partition)}
		if s, ok := slots[k]; ok {
			return s
		}
		s := &SlotStatus{Job: job, Partition: partition}
		slots[k] = s
		return s
	}
	if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) == 1 {
		st.CatalogRevision = kvs[0].ModRevision
		var cat config.Catalog
		if err := json.Unmarshal(kvs[0].Value, &cat); err == nil {
			for _, j := range cat.Jobs {
				for p := 0; p < j.Partitions; p++ {
					slot(j.Name, p)
				}
			}
		}
	}
	// Election keys: election/<job>/<partition>/<lease>; the oldest key leads.
	prefix := scheduler.ElectionPrefix(cluster)
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		parts := strings.Split(strings.TrimPrefix(string(kv.Key), prefix), "/")
		if len(parts) != 3 {
			continue
		}
		p, err := strconv.Atoi(parts[1])
		if err != nil {
			continue
		}
		s := slot(parts[0], p)
		if s.Token == 0 || kv.CreateRevision < s.Token {
			s.Owner, s.Token = string(kv.Value), kv.CreateRevision
		}
	}
	for _, s := range slots {
		st.Slots = append(st.Slots, *s)
	}
	sort.Slice(st.Slots, func(i, j int) bool {
		a, b := st.Slots[i], st.Slots[j]
		if a.Job != b.Job {
			return a.Job < b.Job
		}
		return a.Partition < b.Partition
	})
	return st, nil
}

func printStatus(w io.Writer, st *Status) {
	fmt.Fprintf(w, "cluster %s at revision %d: %d members, %d slots, catalog revision %d\n", st.Cluster, st.Revision, len(st.Members), len(st.Slots), st.CatalogRevision)
	if len(st.Paused) > 0 {
		fmt.Fprintf(w, "paused: %s\n", strings.Join(st.Paused, ", "))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tNAME\tHOST\tSTARTED\tCATALOG\tLEADS")
	leads := map[string]int{}
	for _, s := range st.Slots {
		leads[s.Owner]++
	}
	for _, m := range st.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", m.ID, m.Name, m.Host, m.StartedAt.Format(time.RFC3339), m.CatalogRevision, leads[m.ID])
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tPARTITION\tOWNER\tTOKEN")
	for _, s := range st.Slots {
		owner, token := s.Owner, strconv.FormatInt(s.Token, 10)
		if owner == "" {
			owner, token = "(none)", "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", s.Job, s.Partition, owner, token)
	}
	tw.Flush()
}
