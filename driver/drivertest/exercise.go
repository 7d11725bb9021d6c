package drivertest

import "testing"

// Exercise runs the whole conformance suite against a backend. Every test
// gets its own database from b.New and runs in parallel with the others.
func Exercise[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()
	exerciseDriver(t, b)
	exerciseClient(t, b)
}

// ExerciseDriver runs the suite's driver half, every method of the
// contract, without the client tests: for a backend variant whose
// statements differ (a query mode, a schema) but whose client behaviour
// the full suite already covers.
func ExerciseDriver[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()
	exerciseDriver(t, b)
}

// exerciseDriver specifies the driver contract method by method.
func exerciseDriver[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()
	groups := []struct {
		name string
		run  func(*testing.T, Backend[TTx])
	}{
		{"Insert", exerciseInsert[TTx]},
		{"Executor", exerciseExecutor[TTx]},
		{"Claim", exerciseClaim[TTx]},
		{"Heartbeat", exerciseHeartbeat[TTx]},
		{"Finish", exerciseFinish[TTx]},
		{"Fencing", exerciseFencing[TTx]},
		{"Expire", exerciseExpire[TTx]},
		{"Admin", exerciseAdmin[TTx]},
		{"Migrate", exerciseMigrate[TTx]},
		{"Notify", exerciseNotify[TTx]},
		{"Stats", exerciseStats[TTx]},
		{"Queue", exerciseQueue[TTx]},
		{"Flow", exerciseFlow[TTx]},
		{"Keys", exerciseKeys[TTx]},
		{"Cancel", exerciseCancel[TTx]},
		{"Prune", exercisePrune[TTx]},
		{"Leader", exerciseLeader[TTx]},
		{"Periodic", exercisePeriodic[TTx]},
		{"UniqueFinished", exerciseUniqueFinished[TTx]},
		{"Audit", exerciseAudit[TTx]},
		{"Clients", exerciseClients[TTx]},
	}
	// "Driver/" mirrors the client's "Client/", so -run can select either
	// half: -run 'TestConformance/Driver/(Flow|Cancel)'.
	for _, g := range groups {
		t.Run("Driver/"+g.name, func(t *testing.T) {
			t.Parallel()
			g.run(t, b)
		})
	}
}
