package drivertest

import (
	"slices"
	"testing"
)

// ExerciseClient runs the client half of the suite against a backend: the
// tests named (as in "Client/Drain": "Drain", "CompleteTx"), or all of them
// when none is named. It fails on a name the suite does not have. Backends
// use it to run the client's guarantees in a deployment of their own (the
// postgres backend behind PgBouncer).
func ExerciseClient[TTx any](t *testing.T, b Backend[TTx], names ...string) {
	t.Helper()
	tests := clientTests[TTx]()
	for _, name := range names {
		if !slices.ContainsFunc(tests, func(tc clientTest[TTx]) bool { return tc.name == name }) {
			t.Fatalf("drivertest: no client test %q", name)
		}
	}
	for _, tc := range tests {
		if len(names) > 0 && !slices.Contains(names, tc.name) {
			continue
		}
		t.Run("Client/"+tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, b)
		})
	}
}

// exerciseClient specifies the client's guarantees end to end on the
// backend: exactly-once draining, fencing of paused workers, recovery from
// crashes, expiry policies, outcomes, transactions, heartbeats and outages.
func exerciseClient[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()
	ExerciseClient(t, b)
}

// clientTest is one test of the client half.
type clientTest[TTx any] struct {
	name string
	run  func(*testing.T, Backend[TTx])
}

// clientTests lists the client half in the order it runs.
func clientTests[TTx any]() []clientTest[TTx] {
	return []clientTest[TTx]{
		{"Drain", testClientDrain[TTx]},
		{"PausedPastLease", testClientPausedPastLease[TTx]},
		{"CrashRecovery", testClientCrashRecovery[TTx]},
		{"StuckPolicy", testClientStuckPolicy[TTx]},
		{"Outcomes", testClientOutcomes[TTx]},
		{"Stop", testClientStop[TTx]},
		{"CompleteTx", testClientCompleteTx[TTx]},
		{"CompleteTxBounded", testClientCompleteTxBounded[TTx]},
		{"CompleteTxConfirmed", testClientCompleteTxConfirmed[TTx]},
		{"AmbiguousCommit", testClientAmbiguousCommit[TTx]},
		{"FencedAfterRollback", testClientFencedAfterRollback[TTx]},
		{"ReclaimedBySameClient", testClientReclaimedBySameClient[TTx]},
		{"ResolveStuckTx", testClientResolveStuckTx[TTx]},
		{"Audit", testClientAudit[TTx]},
		{"Bulk", testClientBulk[TTx]},
		{"Registry", testClientRegistry[TTx]},
		{"InsertTx", testClientInsertTx[TTx]},
		{"Heartbeats", testClientHeartbeats[TTx]},
		{"HeartbeatCoalescing", testClientHeartbeatCoalescing[TTx]},
		{"DatabaseOutage", testClientDatabaseOutage[TTx]},
		{"StartUnreachable", testClientStartUnreachable[TTx]},
		{"BadInput", testClientBadInput[TTx]},
		{"UniqueInsert", testClientUniqueInsert[TTx]},
		{"Wakeups", testClientWakeups[TTx]},
		{"OwnInsertClaimsOnce", testClientOwnInsertClaimsOnce[TTx]},
		{"InsertLeased", testClientInsertLeased[TTx]},
		{"WakeupsAcrossPools", testClientWakeupsAcrossPools[TTx]},
		{"HeadJobDuringBacklog", testClientHeadJobDuringBacklog[TTx]},
		{"QueuePause", testClientQueuePause[TTx]},
		{"GlobalLimit", testClientGlobalLimit[TTx]},
		{"GlobalLimitRenewalInFlight", testClientGlobalLimitRenewalInFlight[TTx]},
		{"KindLimit", testClientKindLimit[TTx]},
		{"RateLimit", testClientRateLimit[TTx]},
		{"KeyLimit", testClientKeyLimit[TTx]},
		{"Fairness", testClientFairness[TTx]},
		{"Sequence", testClientSequence[TTx]},
		{"KeyRateLimit", testClientKeyRateLimit[TTx]},
		{"KeyStats", testClientKeyStats[TTx]},
		{"CancelRunning", testClientCancelRunning[TTx]},
		{"CancelCrashedHolder", testClientCancelCrashedHolder[TTx]},
		{"PeriodicLeaderKilled", testClientPeriodicLeaderKilled[TTx]},
		{"Checkpoint", testClientCheckpoint[TTx]},
		{"CheckpointFenced", testClientCheckpointFenced[TTx]},
		{"Dependencies", testClientDependencies[TTx]},
		{"DependencyFailure", testClientDependencyFailure[TTx]},
		{"Batch", testClientBatch[TTx]},
		{"Graph", testClientGraph[TTx]},
		{"PeriodicRestart", testClientPeriodicRestart[TTx]},
		{"PeriodicLeaderStepsDown", testClientPeriodicLeaderStepsDown[TTx]},
		{"Retention", testClientRetention[TTx]},
		{"UniqueOpts", testClientUniqueOpts[TTx]},
		{"Subscribe", testClientSubscribe[TTx]},
		{"SchemaCheck", testClientSchemaCheck[TTx]},
		{"BusyPool", testClientBusyPool[TTx]},
	}
}
