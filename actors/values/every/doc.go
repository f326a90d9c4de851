// Package every runs the service's periodic jobs: each a named function run on
// its interval until its context ends, through one helper (Run) instead of a
// ticker loop per job. A job's runs never overlap; a run's error is counted and
// logged with the job's name, never dropped; and every job reports the same
// metrics (docs/metrics.md, "Periodic jobs"): when it last ran and last
// succeeded, how long it runs, its runs and errors and its interval. The engine
// dashboard shows them per job, and PaysvcJobNotSucceeding fires for a job with
// no success in ten of its intervals (ops/runbooks.md#job-not-succeeding).
//
// The catalogue (catalogue.go) is the one list of the jobs the service runs: Run
// refuses a name that is not in it, and docs/operations.md ("Periodic jobs")
// documents each, checked against the catalogue by a test. A new job adds its
// name there and a row to that table.
//
// It is a leaf of the values layer (it imports nothing of paysvc), so every
// layer that runs a job (rails, the aggregates, api, outbound, the commands) may
// use it.
package every
