package jobs

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/kira-scheduler/kira/fencing"
)

// FenceURL raises a protected resource's fence when a slot is acquired: it
// POSTs the new token (Kira-Job, Kira-Partition, Kira-Fencing-Token headers)
// to the job's fence_url before the slot's first execution. A receiver that
// uses httpfence needs nothing more than its middleware on that path.
type FenceURL struct {
	URL string
	// Client defaults to http.DefaultClient; ctx bounds the request.
	Client *http.Client
}

// Raise sends the token. A 2xx answer means raised; 409 means the resource
// has seen a newer token (fencing.ErrFenced); anything else is an error.
func (f *FenceURL) Raise(ctx context.Context, job string, partition int, token fencing.Token) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.URL, http.NoBody)
	if err != nil {
		return err
	}
	req.Header.Set(HeaderJob, job)
	req.Header.Set(HeaderPartition, strconv.Itoa(partition))
	req.Header.Set(fencing.HeaderToken, token.String())
	client := f.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("jobs: raise fence at %s: %w", f.URL, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusConflict:
		return fmt.Errorf("%w: %s refused token %s", fencing.ErrFenced, f.URL, token)
	}
	return fmt.Errorf("jobs: raise fence at %s: %s", f.URL, resp.Status)
}
