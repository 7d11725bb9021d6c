// Package leaseholdtest helps users test code that inserts and works
// leasehold jobs, in the spirit of River's rivertest.
//
// Assertions about the jobs a piece of code inserted: RequireInserted,
// RequireNotInserted and RequireManyInserted, each with a Tx twin that reads
// inside the caller's transaction and so sees rows not yet committed:
//
//	tx, _ := db.BeginTx(ctx, nil)
//	_ = signUp(ctx, client, tx, "ada@example.com") // inserts a welcome email job
//	job := leaseholdtest.RequireInsertedTx(ctx, t, driver, tx, WelcomeEmailArgs{},
//		&leaseholdtest.RequireInsertedOpts{Queue: "mail"})
//	if job.Args.Email != "ada@example.com" { ... }
//
// A Worker runs one job synchronously through a real client, so the test
// sees the state, attempt row and error the queue would record in
// production:
//
//	w := leaseholdtest.NewWorker(t, driver, nil, &WelcomeEmailWorker{}, nil)
//	res := w.Work(ctx, t, WelcomeEmailArgs{Email: "ada@example.com"}, nil)
//	// res.Job.State, res.Outcome(), res.Err, res.Attempts
//
// The helpers take any driver (package sqlite, package postgres) and report
// failures through a TB, which *testing.T and *testing.B satisfy.
package leaseholdtest
