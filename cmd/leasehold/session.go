package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/dashboard"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/dburl"
	"github.com/leasehold/leasehold/migrate"
)

// operator is what the operator subcommands use of a client. A
// *leasehold.Client of either backend satisfies it; the generic client is
// reduced to this interface so that each command is written once.
type operator interface {
	dashboard.Source
	// Stats feeds the metrics of `serve` (leaseholdprom.Source).
	Stats() leasehold.Stats
	Ping(ctx context.Context) error
	Now(ctx context.Context) (time.Time, error)
	Insert(ctx context.Context, args leasehold.JobArgs, opts *leasehold.InsertOpts) (*leasehold.InsertResult, error)
	QueuePause(ctx context.Context, name string) error
	QueueResume(ctx context.Context, name string) error
	QueueList(ctx context.Context) ([]*leasehold.QueueInfo, error)
	SequencesBlocked(ctx context.Context, params *leasehold.SequencesBlockedParams) ([]*driver.SequenceBlockedRow, error)
	KeyStats(ctx context.Context, params *leasehold.KeyStatsParams) (*driver.KeyStatsResult, error)
	JobLineage(ctx context.Context, id int64, limit int) (*leasehold.GraphView, error)
	GraphCancel(ctx context.Context, graphID int64) (*leasehold.GraphCancelResult, error)
}

var _ operator = (*leasehold.Client[any])(nil)

// migrator is what the migrate subcommand uses of a *migrate.Migrator.
type migrator interface {
	Latest() int
	Known(version int) bool
	Status(ctx context.Context) ([]migrate.Status, error)
	Up(ctx context.Context) ([]int, error)
	UpTo(ctx context.Context, target int) ([]int, error)
	Down(ctx context.Context) ([]int, error)
	DownTo(ctx context.Context, target int) ([]int, error)
}

// now returns the database clock, on which leases are measured, or this
// machine's clock when the database cannot say.
func (s *session) now(ctx context.Context) time.Time {
	if t, err := s.client.Now(ctx); err == nil {
		return t
	}
	return time.Now()
}

// session is an open database with an insert-only client on it: the CLI
// never works jobs, it only reads them and acts on them.
type session struct {
	db       *dburl.DB
	client   operator
	migrator migrator
}

// openOptions say what a command needs of the database.
type openOptions struct {
	// create allows a SQLite file that does not exist yet to be created
	// (migrate up); every other command refuses a missing file rather than
	// leave an empty database behind a typo.
	create bool
	// migrate configures the session's migrator; nil means the defaults.
	migrate *migrate.Config
}

// open opens the database the global flags name. The caller closes it.
func (g *globalOptions) open(cmd *cobra.Command, o openOptions) (*session, error) {
	raw, _ := g.resolveURL(cmd)
	u, err := dburl.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Backend == dburl.SQLite && !o.create {
		if _, err := os.Stat(u.Path); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("SQLite database %s does not exist (create it with: leasehold migrate up --database-url %s)", u.Path, u)
		}
	}
	db, err := dburl.Open(cmd.Context(), raw)
	if err != nil {
		return nil, err
	}
	s := &session{db: db}
	switch db.URL.Backend {
	case dburl.SQLite:
		c, err := leasehold.NewClient(db.SQLite, nil)
		if err != nil {
			db.Close()
			return nil, err
		}
		s.client, s.migrator = c, migrate.NewWithConfig(db.SQLite, o.migrate)
	case dburl.MySQL:
		c, err := leasehold.NewClient(db.MySQL, nil)
		if err != nil {
			db.Close()
			return nil, err
		}
		s.client, s.migrator = c, migrate.NewWithConfig(db.MySQL, o.migrate)
	default:
		c, err := leasehold.NewClient(db.Postgres, nil)
		if err != nil {
			db.Close()
			return nil, err
		}
		s.client, s.migrator = c, migrate.NewWithConfig(db.Postgres, o.migrate)
	}
	return s, nil
}

// Close closes the database.
func (s *session) Close() error { return s.db.Close() }

// explain turns a database error into one line that says what to do. A
// missing table means the schema was never migrated.
func (s *session) explain(err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	missing := errors.As(err, &pgErr) && pgErr.Code == "42P01" ||
		strings.Contains(err.Error(), "no such table") ||
		strings.Contains(err.Error(), "Error 1146 ") // MySQL and MariaDB
	if missing {
		return fmt.Errorf("the leasehold tables are missing in %s: run `leasehold migrate up` first (%v)", s.db.URL, err)
	}
	return err
}

// withSession opens the database, runs fn and closes it, explaining
// database errors.
func (g *globalOptions) withSession(cmd *cobra.Command, o openOptions, fn func(ctx context.Context, s *session) error) error {
	s, err := g.open(cmd, o)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.explain(fn(withCLIActor(cmd.Context()), s)) // operator actions are audited as cli:$USER@host
}
