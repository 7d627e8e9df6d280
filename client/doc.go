// Package client is a Go client of the HTTP API every Kira member serves
// (kira run --http; package api): a method for each route, typed answers,
// typed errors. A service that signs up customers creates one job per
// customer with it, as a user would with curl (docs/catalog.md, "Writing
// one job").
//
//	c, err := client.New("https://kira.example.com:8080", client.WithToken(token))
//	w, err := c.PutJob(ctx, "customer-42", []byte("schedule: '@hourly'\ncommand: [./bill, '42']\n"),
//		client.JobWriteOptions{CreateOnly: true})
//	d, err := c.Definition(ctx, "customer-42") // d.Revision == w.Revision
//
// Every method takes ctx first; it bounds the whole call (cancelling it
// abandons the request, which may still apply on the member). Any member
// answers the same: the API reads and writes the cluster's etcd.
//
// Answers: the API's own exported types where it has them
// (api.JobDefinition, api.JobWritten, api.CatalogApplied, api.Triggered,
// api.JobState), else the client's (Status, JobStatus, JobDetail,
// Execution, Timeline, Member, HealthProblem), field for field the JSON the
// member writes (TestAnswersMatchTheServer holds every route's to a real
// member). Fields a newer member adds are ignored, so an older client
// keeps working.
//
// Errors: an answer outside 2xx is an *Error with its status, the API's
// message and body; IsNotFound, IsConflict, IsPreconditionFailed,
// IsForbidden, IsUnauthorized and IsInvalid test it. A 412's *Error has the
// job's revision now and what changed since (Revision, Differs); a 422's
// every problem located (Problems). Any other error (no answer) means the
// request may or may not have applied.
//
// Retries: none by default. A write is sent once: sent again after a lost
// answer, a trigger would run twice; only a PutJob with IfRevision is safe
// to repeat (a second apply is a 412), and the caller decides that.
// WithReadRetries sends reads again while they fail for a reason that may
// pass.
package client
