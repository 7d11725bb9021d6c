package driver

import "context"

// Notifier is implemented by drivers that can wake clients when jobs are
// inserted by another process (LISTEN/NOTIFY on Postgres; wake-up rows read
// every few milliseconds on MySQL and SQLite). It is a hint: the client
// polls as well.
type Notifier interface {
	// ListenInserts calls fn with a notice whenever jobs are inserted as
	// available into a queue, until ctx ends or the connection fails. It
	// returns nil when ctx ends and an error otherwise; the caller retries.
	// It must call ready once it is listening: a notice of every insert that
	// commits after ready is delivered while the connection holds.
	ListenInserts(ctx context.Context, ready func(), fn func(InsertNotice)) error
}

// InsertNotice is one insert notification.
type InsertNotice struct {
	// Queue is the queue that got available jobs.
	Queue string
	// Sender identifies the database session whose commit sent the notice
	// (the backend process ID on Postgres; on MySQL and SQLite a random
	// identity of the inserting transaction), 0 when the driver cannot tell.
	// It is the identity a SenderTracker was given for the same insert.
	Sender int64
}

// SenderTracker lets a client recognise the notices of its own inserts. A
// client that wakes its own workers after an insert needs no notice of it;
// without one it would claim twice for every job it inserts.
//
// A Notifier's executor that is given a SenderTracker in the params of
// JobInsertMany or JobInsertFast, when it runs on the driver's pool rather
// than in a caller's transaction, tells it which session will send each
// queue's notice, before that notice can be delivered, and takes that
// session back only after reporting the notices that did not go out.
// Executors of other drivers, and executors inside a caller's transaction,
// ignore it.
//
// A driver that coalesces notifications (one notice announcing several
// inserts, see Executor.JobInsertMany) tells a tracker only of notices that
// go out, and only of those that announce the tracker's inserts alone: an
// insert whose notice was held back is told of nothing, or of the later
// notice that announces it, from whichever session sends that one; a notice
// that also announces other inserts is told to no tracker, so that every
// listener wakes for it.
type SenderTracker interface {
	// Sending says that sender will notify queue when the insert commits.
	// It is called before the commit.
	Sending(sender int64, queue string)
	// Unsent withdraws a Sending whose notice did not or may not have gone
	// out: the insert failed, its commit failed or was not confirmed, or it
	// inserted no available job into the queue. It is called before the
	// session runs anything else.
	Unsent(sender int64, queue string)
}

// NotifierSwitch is implemented by a Notifier that can be configured not to
// listen (the postgres driver with Options.DisableListen, for a database
// reached only through a transaction-mode pooler, where LISTEN loses
// notifications). A driver whose Notifies reports false is treated as one
// without the Notifier capability: its clients poll.
type NotifierSwitch interface {
	// Notifies reports whether ListenInserts may be used.
	Notifies() bool
}

// NotifierOf returns d's Notifier capability: d as a Notifier, unless it is
// not one or it is a NotifierSwitch whose Notifies reports false. Clients
// and wrappers of drivers look the capability up with it.
func NotifierOf(d any) (Notifier, bool) {
	n, ok := d.(Notifier)
	if !ok {
		return nil, false
	}
	if s, ok := d.(NotifierSwitch); ok && !s.Notifies() {
		return nil, false
	}
	return n, true
}
