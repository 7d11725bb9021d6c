// Package sqlbackend holds the logic that the database/sql backends (mysql
// and sqlite) share: the state of the transactions they start, the job
// listing and the reading of result rows. Where their SQL differs, each
// backend passes its own.
package sqlbackend
