package mysql

import (
	"database/sql"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

func testJob(queue string) *driver.JobInsertParams {
	return &driver.JobInsertParams{
		Kind: "test", Queue: queue, Priority: 1,
		EncodedArgs: []byte(`{"n": 1}`), Metadata: []byte(`{}`), MaxAttempts: 3,
	}
}

// TestTimesWithoutParseTime runs on a *sql.DB of the user's own, opened
// without parseTime and in a non-UTC session time zone: times still come
// back right, because the driver reads and writes them itself on UTC.
func TestTimesWithoutParseTime(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t)
	cfg, err := mysqldriver.ParseDSN(testDSN())
	if err != nil {
		t.Fatal(err)
	}
	var dbName string
	if err := d.DB().QueryRowContext(t.Context(), "SELECT DATABASE()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbName
	cfg.MultiStatements = true
	cfg.Params = map[string]string{"time_zone": "'+05:30'"}
	own, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	exec := New(own).GetExecutor()

	at := time.Now().UTC().Add(time.Hour).Truncate(time.Microsecond)
	p := testJob("tz")
	p.ScheduledAt = &at
	res, err := exec.JobInsertMany(t.Context(), &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{p}})
	if err != nil {
		t.Fatal(err)
	}
	job := res[0].Job
	if !job.ScheduledAt.Equal(at) || job.State != leasetype.JobStateScheduled {
		t.Errorf("scheduled_at = %s state %s, want %s scheduled", job.ScheduledAt, job.State, at)
	}
	now, err := exec.Now(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(now); d > time.Minute || d < -time.Minute {
		t.Errorf("Now = %s, %s from the local clock; want UTC", now, d)
	}
	if got, err := d.GetExecutor().JobGet(t.Context(), &driver.JobGetParams{ID: job.ID}); err != nil || !got.ScheduledAt.Equal(at) {
		t.Errorf("through Open: scheduled_at = %v, %v; want %s", got, err, at)
	}
}

// TestIntOf: intOf reads what go-sql-driver hands over for an integer
// column (int64; uint64 for an unsigned BIGINT; text from other drivers),
// NULL as not valid, and refuses the rest; the destinations of scanJob
// refuse NULL, but for the lease TTL, where it is zero.
func TestIntOf(t *testing.T) {
	for _, c := range []struct {
		src   any
		want  int64
		valid bool
		fails bool
	}{
		{src: int64(-42), want: -42, valid: true},
		{src: uint64(7), want: 7, valid: true},
		{src: []byte("123456789012"), want: 123456789012, valid: true},
		{src: "5", want: 5, valid: true},
		{src: nil},
		{src: uint64(1 << 63), fails: true},
		{src: []byte("1.5"), fails: true},
		{src: 1.5, fails: true},
	} {
		got, valid, err := intOf(c.src)
		if c.fails {
			if err == nil {
				t.Errorf("intOf(%#v) = %d, %v, want an error", c.src, got, valid)
			}
			continue
		}
		if err != nil || got != c.want || valid != c.valid {
			t.Errorf("intOf(%#v) = %d, %v, %v; want %d, %v", c.src, got, valid, err, c.want, c.valid)
		}
	}
	var n int
	if err := (intInto{&n}).Scan(nil); err == nil {
		t.Error("intInto scanned NULL without an error")
	}
	ttl := time.Second
	if err := (msInto{&ttl}).Scan(nil); err != nil || ttl != 0 {
		t.Errorf("msInto scanned NULL as %s, %v; want 0", ttl, err)
	}
	if err := (msInto{&ttl}).Scan(int64(1500)); err != nil || ttl != 1500*time.Millisecond {
		t.Errorf("msInto scanned 1500 as %s, %v; want 1.5s", ttl, err)
	}
}
