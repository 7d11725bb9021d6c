package dashboard_test

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
)

type noopArgs struct{}

func (noopArgs) Kind() string { return "dash_noop" }

// TestClientsPage: the processes view lists a started client with its
// host, PID, ID, version and queues, and a client that stopped beating as
// gone; the overview's fleet figures count them and the running jobs of
// the whole database, not the dashboard's own idle client.
func TestClientsPage(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		testClientsPage(t, newSQLite(t))
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		testClientsPage(t, newPostgres(t))
	})
}

func testClientsPage[TTx any](t *testing.T, d driver.Driver[TTx]) {
	e := newEnv(t, d)
	res := e.get("/clients")
	if res.code != http.StatusOK {
		t.Fatalf("GET /clients = %d:\n%s", res.code, res.body)
	}
	mustContain(t, "empty clients page", res.body, `<title>Clients · Leasehold</title>`, "No working clients", `class="active">Clients</a>`)

	ws := leasehold.NewWorkers()
	leasehold.AddWorker(ws, leasehold.WorkFunc[noopArgs](func(context.Context, *leasehold.Job[noopArgs]) error { return nil }))
	worker, err := leasehold.NewClient(d, &leasehold.Config{ID: "dash-worker", Workers: ws, Logger: slog.New(slog.DiscardHandler),
		Queues: map[string]leasehold.QueueConfig{"mail": {MaxWorkers: 2}, "sms": {MaxWorkers: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = worker.Stop(context.Background()) })
	// The client registers in the background right after Start.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		rows, err := worker.Clients(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the started client is not registered 5 s after Start: %v", rows)
		}
	}
	if err := e.exec.ClientRegister(t.Context(), &driver.ClientRegisterParams{Owner: "web-9:77:gone1", Host: "web-9", PID: 77, ID: "gone1", Queues: []string{"mail"}, Running: 3, TTL: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	e.seed() // one running job (leased by testOwner, outside the registry)
	time.Sleep(5 * time.Millisecond)

	res = e.get("/clients")
	mustContain(t, "clients page", res.body,
		"1 alive, 1 gone",
		`<td class="mono opt">dash-worker</td>`, `href="/jobs?queue=mail">mail</a>, <a href="/jobs?queue=sms">sms</a>`,
		`<td class="mono opt">gone1</td>`, `>gone</span>`, `>alive</span>`,
		`title="`+worker.Owner()+`"`,
	)
	if regexp.MustCompile(`(?s)dash-worker.*gone1`).FindString(res.body) == "" {
		t.Error("alive clients are not listed before gone ones")
	}

	res = e.get("/")
	mustContain(t, "overview fleet", res.body, "Clients alive", "Clients gone")
	fleet := regexp.MustCompile(`(?s)<h2>Fleet.*?</section>`).FindString(res.body)
	for _, want := range []string{
		`<dt>Clients alive</dt><dd><a href="/clients">1</a></dd>`,
		`<dt>Jobs running</dt><dd><a href="/running">1</a></dd>`,
		`<dd class="warn">1</dd>`,
	} {
		mustContain(t, "fleet section", fleet, want)
	}

	if err := worker.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	res = e.get("/clients")
	mustContain(t, "clients page after Stop", res.body, "0 alive, 1 gone")
}
