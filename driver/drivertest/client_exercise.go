package drivertest

import "testing"

// exerciseClient specifies the client's guarantees end to end on the
// backend: exactly-once draining, fencing of paused workers, recovery from
// crashes, expiry policies, outcomes, transactions, heartbeats and outages.
func exerciseClient[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()
	tests := []struct {
		name string
		run  func(*testing.T, Backend[TTx])
	}{
		{"Drain", testClientDrain[TTx]},
		{"PausedPastLease", testClientPausedPastLease[TTx]},
		{"CrashRecovery", testClientCrashRecovery[TTx]},
		{"StuckPolicy", testClientStuckPolicy[TTx]},
		{"Outcomes", testClientOutcomes[TTx]},
		{"Stop", testClientStop[TTx]},
		{"CompleteTx", testClientCompleteTx[TTx]},
		{"ResolveStuckTx", testClientResolveStuckTx[TTx]},
		{"InsertTx", testClientInsertTx[TTx]},
		{"Heartbeats", testClientHeartbeats[TTx]},
		{"HeartbeatCoalescing", testClientHeartbeatCoalescing[TTx]},
		{"DatabaseOutage", testClientDatabaseOutage[TTx]},
		{"StartUnreachable", testClientStartUnreachable[TTx]},
		{"BadInput", testClientBadInput[TTx]},
		{"UniqueInsert", testClientUniqueInsert[TTx]},
		{"Wakeups", testClientWakeups[TTx]},
		{"OwnInsertClaimsOnce", testClientOwnInsertClaimsOnce[TTx]},
		{"HeadJobDuringBacklog", testClientHeadJobDuringBacklog[TTx]},
		{"QueuePause", testClientQueuePause[TTx]},
		{"GlobalLimit", testClientGlobalLimit[TTx]},
		{"KindLimit", testClientKindLimit[TTx]},
		{"RateLimit", testClientRateLimit[TTx]},
		{"CancelRunning", testClientCancelRunning[TTx]},
		{"CancelCrashedHolder", testClientCancelCrashedHolder[TTx]},
		{"PeriodicLeaderKilled", testClientPeriodicLeaderKilled[TTx]},
		{"PeriodicRestart", testClientPeriodicRestart[TTx]},
		{"PeriodicLeaderStepsDown", testClientPeriodicLeaderStepsDown[TTx]},
		{"Retention", testClientRetention[TTx]},
		{"UniqueOpts", testClientUniqueOpts[TTx]},
		{"Subscribe", testClientSubscribe[TTx]},
		{"BusyPool", testClientBusyPool[TTx]},
	}
	for _, tc := range tests {
		t.Run("Client/"+tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, b)
		})
	}
}
