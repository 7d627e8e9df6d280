// Package config owns the job catalog: its YAML schema, its defaults and its
// validation.
//
// A catalog is parsed strictly: unknown fields, duplicate keys, wrong types,
// duplicate job names, bad cron expressions, a job with no executor or more
// than one, and a lease TTL under 2s are all rejected, and every problem is
// reported with the file, line, column and the field's path
// (jobs[1].schedule), so that a user can fix it without guessing. Parse
// reports every problem it finds, not only the first; nothing is started from
// a catalog that has one. catalog.go is the schema (the types a valid
// catalog is made of, and their defaults); validate.go is the validator
// (Load, Parse, Lint and the checks behind them).
//
// Schedules are robfig/cron expressions (optional seconds field, descriptors
// such as @hourly, CRON_TZ=). "@every D" is anchored to a fixed origin (Go's
// zero time) rather than to process start, so every member computes the same
// scheduled times; execution ids, derived from scheduled times, depend on that.
package config
