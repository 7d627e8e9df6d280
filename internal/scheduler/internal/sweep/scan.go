package sweep

import (
	"context"
	"fmt"

	"github.com/kira-scheduler/kira/internal/keyspace"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// scanPage is how many keys one request of a scan returns.
const scanPage = 10000

// Scan lists the jobs whose keys a sweep may have to delete: those with a
// state key or a control key that live does not know as a job (false), or
// that was written before the job it knows was created. live is the
// catalog the caller runs, which may lag the stored one: Job decides on
// the stored one. A slot's history goes with its state key, so a job with
// records has one; the keys are read without values, page by page.
func Scan(ctx context.Context, kv clientv3.KV, cluster string, live func(job string) (created int64, ok bool)) ([]string, error) {
	found := map[string]bool{}
	var out []string
	note := func(job string, modRev int64) {
		if found[job] {
			return
		}
		if created, ok := live(job); ok && modRev >= created {
			return
		}
		found[job] = true
		out = append(out, job)
	}
	err := scanKeys(ctx, kv, keyspace.States(cluster), func(key string, modRev int64) {
		if s, ok := keyspace.ParseState(cluster, key); ok {
			note(s.Job, modRev)
		}
	})
	if err != nil {
		return nil, err
	}
	err = scanKeys(ctx, kv, keyspace.Control(cluster), func(key string, modRev int64) {
		if ck, ok := keyspace.ParseControl(cluster, key); ok {
			note(ck.Job, modRev)
		}
	})
	return out, err
}

// scanKeys calls each with every key under prefix, without its value.
func scanKeys(ctx context.Context, kv clientv3.KV, prefix string, each func(key string, modRev int64)) error {
	key, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	for {
		resp, err := kv.Get(ctx, key, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(scanPage))
		if err != nil {
			return fmt.Errorf("sweep: scan %s: %w", prefix, err)
		}
		for _, kv := range resp.Kvs {
			each(string(kv.Key), kv.ModRevision)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
