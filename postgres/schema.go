package postgres

import (
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/driver"
)

// Schema support: with Options.Schema set, the driver names its schema in
// every statement instead of relying on the connections' search_path, which
// a transaction-mode pooler cannot carry (PgBouncer refuses the search_path
// and options startup parameters, and a SET lasts only as long as the
// server connection the pooler happened to hand out). The SQL constants stay
// unqualified: a qualifier rewrites each statement text once per driver and
// caches the result, so that every statement of every file is covered
// without editing it, and the conformance suite runs with Schema set on
// connections whose search_path finds nothing (TestSchemaOption), which
// fails on any statement the rewrite missed.

// maxIdentifierLen is Postgres's longest identifier (NAMEDATALEN - 1), in
// bytes; longer channel names are refused by pg_notify.
const maxIdentifierLen = 63

// qualifierCacheSize bounds the cache of rewritten statements. The driver's
// statements are constants plus the listing filters' combinations, far
// fewer; past the bound statements are rewritten on every use.
const qualifierCacheSize = 4096

// extraRelations are the driver's relations that no migration file creates.
var extraRelations = []string{"leasehold_migration"}

var (
	createdRE = regexp.MustCompile(`(?i)\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:UNLOGGED\s+)?` +
		`(?:TABLE|SEQUENCE|VIEW|MATERIALIZED\s+VIEW|TYPE|DOMAIN|FUNCTION|PROCEDURE)\s+` +
		`(?:IF\s+NOT\s+EXISTS\s+)?(leasehold_\w+)`)
	renamedRE   = regexp.MustCompile(`(?i)\bALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?leasehold_\w+\s+RENAME\s+TO\s+"?(leasehold_\w+)`)
	tableBodyRE = regexp.MustCompile(`(?is)\bCREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(leasehold_\w+)\s*\((.*?)\n\)`)
	serialRE    = regexp.MustCompile(`(?im)^\s*(\w+)\s+(?:small|big)?serial\b`)
)

// relationNames returns the names of the relations, sequences, types and
// functions the migrations create or rename a table to (a serial column's
// sequence included) and the driver's bookkeeping table, sorted. Index and constraint names are not
// among them: they live in their table's schema and must stay unqualified
// where they are defined. TestSchemaRelations checks the list against what a
// migrated schema holds.
func relationNames(ms []driver.Migration) []string {
	names := slices.Clone(extraRelations)
	for _, m := range ms {
		for _, sub := range createdRE.FindAllStringSubmatch(m.Up, -1) {
			names = append(names, sub[1])
		}
		for _, sub := range renamedRE.FindAllStringSubmatch(m.Up, -1) {
			names = append(names, sub[1])
		}
		for _, table := range tableBodyRE.FindAllStringSubmatch(m.Up, -1) {
			for _, col := range serialRE.FindAllStringSubmatch(table[2], -1) {
				names = append(names, table[1]+"_"+col[1]+"_seq")
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// validSchema checks a schema name given in Options.Schema.
func validSchema(s string) error {
	switch {
	case len(s) > maxIdentifierLen:
		return fmt.Errorf("schema %q is longer than %d bytes", s, maxIdentifierLen)
	case !utf8.ValidString(s) || strings.ContainsAny(s, "\x00\"'"):
		return fmt.Errorf("schema %q: want a name without quotes", s)
	}
	return nil
}

// insertChannelFor returns the insert notification channel of the tables in
// schema: "schema.leasehold_insert", or, when that is longer than an
// identifier may be, the channel named by a hash of the schema. Clients of
// different schemas in one database then wake only each other's.
func insertChannelFor(schema string) string {
	if schema == "" {
		return insertChannel
	}
	if ch := schema + "." + insertChannel; len(ch) <= maxIdentifierLen {
		return ch
	}
	h := fnv.New64a()
	h.Write([]byte(schema))
	return fmt.Sprintf("%x.%s", h.Sum64(), insertChannel)
}

// qualifier rewrites the driver's statements for a schema: every name of
// relationNames not already qualified gets the schema, wherever it occurs
// (as a table, a column's table, or inside a string literal such as
// nextval('leasehold_job_id_seq'), which becomes
// nextval('"s".leasehold_job_id_seq')); the insert channel literal
// 'leasehold_insert' becomes the schema's channel (insertChannelFor).
type qualifier struct {
	schema  string // the schema as given
	quoted  string // the schema as an identifier, quoted
	names   map[string]bool
	re      *regexp.Regexp
	channel string

	mu    sync.RWMutex
	cache map[string]string
}

// errSchemaNames is returned when there is nothing to qualify.
var errSchemaNames = errors.New("no relation names found in the migrations")

func newQualifier(schema string, ms []driver.Migration) (*qualifier, error) {
	if err := validSchema(schema); err != nil {
		return nil, err
	}
	names := relationNames(ms)
	if len(names) == 0 {
		return nil, errSchemaNames
	}
	quotedNames := make([]string, len(names))
	set := make(map[string]bool, len(names))
	for i, n := range names {
		quotedNames[i] = regexp.QuoteMeta(n)
		set[n] = true
	}
	// The leading group keeps what precedes a name: not a qualifier's dot, a
	// quote or part of a longer identifier.
	re := regexp.MustCompile(`(^|[^\w."$])(` + strings.Join(quotedNames, "|") + `)\b`)
	return &qualifier{
		schema:  schema,
		quoted:  pgx.Identifier{schema}.Sanitize(),
		names:   set,
		re:      re,
		channel: insertChannelFor(schema),
		cache:   map[string]string{},
	}, nil
}

// sql returns query rewritten for the schema; q may be nil (no schema).
func (q *qualifier) sql(query string) string {
	if q == nil {
		return query
	}
	q.mu.RLock()
	out, ok := q.cache[query]
	q.mu.RUnlock()
	if ok {
		return out
	}
	out = q.re.ReplaceAllString(query, "${1}"+strings.ReplaceAll(q.quoted, "$", "$$")+".${2}")
	out = strings.ReplaceAll(out, "'"+insertChannel+"'", "'"+q.channel+"'")
	q.mu.Lock()
	if len(q.cache) < qualifierCacheSize {
		q.cache[query] = out
	}
	q.mu.Unlock()
	return out
}

// table returns a COPY target qualified with the schema when it is one of
// the driver's relations.
func (q *qualifier) table(id pgx.Identifier) pgx.Identifier {
	if q == nil || len(id) != 1 || !q.names[id[0]] {
		return id
	}
	return pgx.Identifier{q.schema, id[0]}
}

// batch rewrites the statements queued in b.
func (q *qualifier) batch(b *pgx.Batch) {
	for _, qq := range b.QueuedQueries {
		qq.SQL = q.sql(qq.SQL)
	}
}

// migrations returns ms with each script run with the schema first on the
// search_path, for the names the rewrite leaves alone (indexes dropped or
// renamed by name). SET LOCAL lasts until the migration's transaction ends,
// so it is safe through a transaction-mode pooler.
func (q *qualifier) migrations(ms []driver.Migration) []driver.Migration {
	if q == nil {
		return ms
	}
	set := "SET LOCAL search_path TO " + q.quoted + ";\n"
	out := make([]driver.Migration, len(ms))
	for i, m := range ms {
		out[i] = m
		out[i].Up = set + m.Up
		if m.Down != "" {
			out[i].Down = set + m.Down
		}
	}
	return out
}
