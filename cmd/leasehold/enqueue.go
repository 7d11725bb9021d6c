package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
)

// rawArgs are job arguments given as JSON on the command line. The CLI has
// no Go type for the kind, so the arguments are stored exactly as given
// (compacted), for the worker's own type to decode.
type rawArgs struct {
	kind string
	raw  json.RawMessage
}

// Kind returns the kind given with --kind.
func (a rawArgs) Kind() string { return a.kind }

// MarshalJSON returns the validated JSON given with --args.
func (a rawArgs) MarshalJSON() ([]byte, error) { return a.raw, nil }

// parseObject checks that s is one JSON object and returns it compacted.
func parseObject(flag, s string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if !json.Valid([]byte(s)) {
		var v any
		err := json.Unmarshal([]byte(s), &v)
		return nil, fmt.Errorf("--%s is not valid JSON: %v (example: --%s '{\"payment_id\": 42}')", flag, err, flag)
	}
	if !strings.HasPrefix(s, "{") {
		return nil, fmt.Errorf("--%s must be a JSON object ({...}), got %s", flag, truncate(s, 40))
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	return buf.Bytes(), nil
}

// enqueueOptions are enqueue's flags.
type enqueueOptions struct {
	kind, args, queue, runAt, uniqueKey, metadata string
	key, sequence                                 string
	priority, maxAttempts                         int
	leaseTTL                                      time.Duration
	json                                          bool
}

func newEnqueueCmd(g *globalOptions) *cobra.Command {
	o := &enqueueOptions{}
	cmd := &cobra.Command{
		Use:   "enqueue --kind KIND [--args JSON]",
		Short: "Insert a job",
		Long: `enqueue inserts one job of the given kind with its arguments as a JSON object;
a worker registered for the kind decodes them into its own type.

With --unique-key the insert is idempotent: while a job with the same key is
waiting, running or stuck, nothing is inserted and that job is shown instead.
The JSON is checked before the database is touched.`,
		Example: `  leasehold enqueue --kind charge --args '{"payment_id": 42}'
  leasehold enqueue --kind charge --args '{"payment_id": 42}' --queue payments --priority 1 \
      --unique-key charge-42 --max-attempts 5 --lease-ttl 2m
  leasehold enqueue --kind payout --args @payout.json
  generate-payload | leasehold enqueue --kind payout --args -
  leasehold enqueue --kind report --run-at 2030-01-02T03:04:05Z --metadata '{"requested_by": "ops"}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			args, opts, err := o.build(cmd)
			if err != nil {
				return err
			}
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				res, err := s.client.Insert(ctx, args, opts)
				if err != nil {
					return fmt.Errorf("enqueue: %w", err)
				}
				if o.json {
					return writeJSON(cmd.OutOrStdout(), struct {
						UniqueSkipped bool     `json:"unique_skipped"`
						Job           *jobJSON `json:"job"`
					}{res.UniqueSkipped, toJobJSON(res.Job)})
				}
				out := cmd.OutOrStdout()
				if res.UniqueSkipped {
					fmt.Fprintf(out, "unique key %q matched existing job %d (%s): nothing inserted\n\n", o.uniqueKey, res.Job.ID, res.Job.State)
				} else {
					fmt.Fprintf(out, "inserted job %d\n\n", res.Job.ID)
				}
				return writeJobDetail(out, res.Job, s.now(ctx))
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kind, "kind", "", "job kind (required): selects the worker")
	f.StringVar(&o.args, "args", "{}", "job arguments, a JSON object; @FILE reads it from FILE, - from standard input")
	f.StringVar(&o.queue, "queue", "", "queue (default \"default\")")
	f.IntVar(&o.priority, "priority", 0, "priority, 1 (claimed first) to 4 (default 1)")
	f.StringVar(&o.runAt, "run-at", "", "earliest run time, RFC 3339 (2030-01-02T03:04:05Z); default now")
	f.StringVar(&o.uniqueKey, "unique-key", "", "idempotency key: no second job while one with this key is unfinished")
	f.StringVar(&o.key, "key", "", "flow-control key: per-key limits, rate limits and fairness count the job under it")
	f.StringVar(&o.sequence, "sequence", "", "sequence key: jobs with the same one run one after another in insert order")
	f.IntVar(&o.maxAttempts, "max-attempts", 0, "handler failures before the job is discarded (default: the client's, 25)")
	f.DurationVar(&o.leaseTTL, "lease-ttl", 0, "lease duration for this job (default: the worker's)")
	f.StringVar(&o.metadata, "metadata", "", "metadata, a JSON object; @FILE or - as for --args")
	addJSONFlag(cmd, &o.json)
	_ = cmd.MarkFlagRequired("kind")
	return cmd
}

// readArgsFlag returns a JSON flag's text: the value itself, the contents
// of FILE for "@FILE", or standard input for "-". Real payloads outgrow one
// command-line argument (Linux caps one at 128 KiB).
func readArgsFlag(name, value string, stdin io.Reader) (string, error) {
	var b []byte
	var err error
	switch {
	case value == "-":
		b, err = io.ReadAll(stdin)
		if err != nil {
			return "", fmt.Errorf("--%s -: read standard input: %w", name, err)
		}
	case strings.HasPrefix(value, "@"):
		b, err = os.ReadFile(value[1:])
		if err != nil {
			return "", fmt.Errorf("--%s %s: %w", name, value, err)
		}
	default:
		return value, nil
	}
	return string(b), nil
}

// build validates the flags into the job and its options.
func (o *enqueueOptions) build(cmd *cobra.Command) (leasehold.JobArgs, *leasehold.InsertOpts, error) {
	if strings.TrimSpace(o.kind) == "" {
		return nil, nil, fmt.Errorf("--kind is empty")
	}
	text, err := readArgsFlag("args", o.args, cmd.InOrStdin())
	if err != nil {
		return nil, nil, err
	}
	raw, err := parseObject("args", text)
	if err != nil {
		return nil, nil, err
	}
	opts := &leasehold.InsertOpts{Queue: o.queue, Priority: o.priority, MaxAttempts: o.maxAttempts, LeaseTTL: o.leaseTTL, UniqueKey: o.uniqueKey,
		Key: o.key, Sequence: o.sequence}
	f := cmd.Flags()
	if f.Changed("queue") && o.queue == "" {
		return nil, nil, fmt.Errorf("--queue is empty")
	}
	if f.Changed("priority") && (o.priority < 1 || o.priority > 4) {
		return nil, nil, fmt.Errorf("--priority %d is outside 1 to 4", o.priority)
	}
	if f.Changed("max-attempts") && o.maxAttempts < 1 {
		return nil, nil, fmt.Errorf("--max-attempts %d is below 1", o.maxAttempts)
	}
	if f.Changed("lease-ttl") && o.leaseTTL <= 0 {
		return nil, nil, fmt.Errorf("--lease-ttl %s must be positive", o.leaseTTL)
	}
	if o.runAt != "" {
		at, err := time.Parse(time.RFC3339, o.runAt)
		if err != nil {
			return nil, nil, fmt.Errorf("--run-at %q is not an RFC 3339 time (example: 2030-01-02T03:04:05Z)", o.runAt)
		}
		opts.ScheduledAt = at
	}
	if o.metadata != "" {
		text, err := readArgsFlag("metadata", o.metadata, cmd.InOrStdin())
		if err != nil {
			return nil, nil, err
		}
		meta, err := parseObject("metadata", text)
		if err != nil {
			return nil, nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(meta))
		dec.UseNumber() // keep large integers exact
		if err := dec.Decode(&opts.Metadata); err != nil {
			return nil, nil, fmt.Errorf("--metadata: %w", err)
		}
	}
	return rawArgs{kind: o.kind, raw: raw}, opts, nil
}
