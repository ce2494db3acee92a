package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/internal/cmdkit"

	"github.com/sluicemq/sluice/internal/qcopy"
)

const copyUsage = `Usage: sluice copy --from URL --to URL [--queues PATTERN] [--create] [--move] [--dry-run]
                   [--concurrency N] [--visibility S] [--json]

Copies queues and their messages from one SQS endpoint (Sluice, Amazon SQS, ...)
to another: bodies, message attributes, MessageGroupId, MessageDeduplicationId
and AWSTraceHeader (not MessageId, SentTimestamp or receive counts).

  --create    create the missing destination queues with the source's
              attributes and tags (dead-letter targets first, their ARNs
              rewritten to the destination's)
  --move      delete each message from the source once the destination has
              acknowledged it (and its MD5s match). Without --move the copied
              messages stay at the source and become visible again after
              --visibility seconds: use copy without --move only on a stopped
              source you will discard, or as a rehearsal of the move.
  --dry-run   list what would be created and how many messages there are;
              change nothing

A queue is done when two receives in a row bring nothing new. Messages in
flight or delayed at the source cannot be received: the report counts them,
so run the command again once they are visible. Credentials: AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, or per side
SLUICE_FROM_AWS_ACCESS_KEY_ID ... and SLUICE_TO_AWS_ACCESS_KEY_ID ....

Flags:
`

func copyQueues(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("copy", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprint(env.Stderr, copyUsage)
		fs.PrintDefaults()
	}
	var o qcopy.Options
	var fromURL, toURL, fromRegion, toRegion string
	fs.StringVar(&fromURL, "from", "", "source endpoint URL (required)")
	fs.StringVar(&toURL, "to", "", "destination endpoint URL (required)")
	fs.StringVar(&fromRegion, "from-region", "us-east-1", "region to sign source requests for")
	fs.StringVar(&toRegion, "to-region", "us-east-1", "region to sign destination requests for")
	queues := fs.String("queues", "*", "queue name glob; several separated by commas")
	fs.BoolVar(&o.Move, "move", false, "delete from the source what the destination acknowledged")
	fs.BoolVar(&o.Create, "create", false, "create missing destination queues with the source's attributes and tags")
	fs.BoolVar(&o.DryRun, "dry-run", false, "list what would be done; change nothing")
	asJSON := fs.Bool("json", false, "print JSON")
	fs.IntVar(&o.Concurrency, "concurrency", 4, "receive-and-send loops at once (1-64); a FIFO queue gets one")
	vis := fs.Int("visibility", 60, "visibility timeout of received source messages, seconds (copy: until they reappear)")
	pos, err := cmdkit.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return fmt.Errorf("copy: unexpected argument %q", pos[0])
	case fromURL == "" || toURL == "":
		return errors.New("copy: --from and --to are required")
	case fromURL == toURL:
		return errors.New("copy: --from and --to are the same endpoint")
	case o.Concurrency < 1 || o.Concurrency > 64:
		return errors.New("copy: --concurrency must be 1 to 64")
	case *vis < 1 || *vis > 43200:
		return errors.New("copy: --visibility must be 1 to 43200 seconds")
	}
	o.Visibility = int32(*vis)
	for _, p := range strings.Split(*queues, ",") {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("copy: --queues %q: %w", p, err)
		}
		o.Patterns = append(o.Patterns, p)
	}
	o.Source = cmdkit.NewSQS(fromURL, fromRegion, sideEnv(env, "FROM"))
	o.Destination = cmdkit.NewSQS(toURL, toRegion, sideEnv(env, "TO"))
	rep, err := qcopy.Run(ctx, o)
	if err != nil {
		return err
	}
	if o.DryRun {
		return printDryRun(env, rep, *asJSON)
	}
	return printCopy(env, rep, o, *asJSON)
}

// sideEnv is env with one side's credentials: SLUICE_<side>_AWS_ACCESS_KEY_ID
// (with its _SECRET_ACCESS_KEY and _SESSION_TOKEN) when set, else the usual
// AWS_* variables.
func sideEnv(env Env, side string) Env {
	get := env.Getenv
	if get("SLUICE_"+side+"_AWS_ACCESS_KEY_ID") == "" {
		return env
	}
	env.Getenv = func(k string) string {
		if strings.HasPrefix(k, "AWS_") {
			return get("SLUICE_" + side + "_" + k)
		}
		return get(k)
	}
	return env
}

// printCopy prints a copy's report: a table (or JSON) on stdout, the
// reasons of failures on stderr; an error when anything failed.
func printCopy(env Env, rep qcopy.Report, o qcopy.Options, asJSON bool) error {
	verb := "copied"
	if o.Move {
		verb = "moved"
	}
	var rows [][]string
	var notes []string
	for _, r := range rep.Queues {
		if r.Error != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", r.Name, r.Error))
		}
		const shown = 10
		for i, why := range r.Errors {
			if i == shown {
				notes = append(notes, fmt.Sprintf("%s: ... and %d more (--json lists up to 100)", r.Name, r.Failed-shown))
				break
			}
			notes = append(notes, fmt.Sprintf("%s: message %s", r.Name, why))
		}
		dest := dash(r.Destination)
		if r.Error != "" {
			dest += " (failed)"
		}
		rows = append(rows, []string{r.Name, dest, strconv.Itoa(r.Copied), strconv.Itoa(r.Failed), count(r.Visible), count(r.InFlight), count(r.Delayed)})
	}
	if asJSON {
		if err := cmdkit.WriteJSON(env.Stdout, rep); err != nil {
			return err
		}
	} else {
		cmdkit.Table(env.Stdout, []string{"QUEUE", "DESTINATION", strings.ToUpper(verb), "FAILED", "LEFT VISIBLE", "IN FLIGHT", "DELAYED"}, rows)
		fmt.Fprintf(env.Stdout, "total: %d %s, %d failed\n", rep.Copied, verb, rep.Failed)
		switch {
		case rep.Held > 0 && o.Move:
			fmt.Fprintf(env.Stdout, "%d messages were in flight or delayed at the source and could not be received: run the same command again once they are visible\n", rep.Held)
		case rep.Held > 0:
			fmt.Fprintf(env.Stdout, "the copied messages stay in flight at the source for %d s, then are visible again (in flight or delayed there: %d)\n", o.Visibility, rep.Held)
		}
	}
	for _, n := range notes {
		fmt.Fprintln(env.Stderr, "sluice: copy:", n)
	}
	if rep.Failed > 0 || rep.FailedQueues > 0 {
		return fmt.Errorf("copy: %d messages not %s, %d queues failed", rep.Failed, verb, rep.FailedQueues)
	}
	return nil
}

func count(n int) string {
	if n < 0 {
		return "?"
	}
	return strconv.Itoa(n)
}

// printDryRun prints what a copy would create and how many messages it
// would find.
func printDryRun(env Env, rep qcopy.Report, asJSON bool) error {
	if asJSON {
		return cmdkit.WriteJSON(env.Stdout, rep)
	}
	var rows [][]string
	var lines []string
	for _, r := range rep.Queues {
		rows = append(rows, []string{r.Name, r.Destination, strconv.Itoa(r.Visible), strconv.Itoa(r.InFlight), strconv.Itoa(r.Delayed)})
		if r.Destination != "would create" {
			continue
		}
		var kv []string
		for _, n := range sortedKeys(r.Attributes) {
			kv = append(kv, n+"="+r.Attributes[n])
		}
		line := "create " + r.Name + ": " + strings.Join(kv, " ")
		if len(r.Tags) > 0 {
			var tags []string
			for _, n := range sortedKeys(r.Tags) {
				tags = append(tags, n+"="+r.Tags[n])
			}
			line += "; tags " + strings.Join(tags, " ")
		}
		lines = append(lines, line)
	}
	cmdkit.Table(env.Stdout, []string{"QUEUE", "DESTINATION", "MESSAGES", "IN FLIGHT", "DELAYED"}, rows)
	for _, l := range lines {
		fmt.Fprintln(env.Stdout, l)
	}
	fmt.Fprintln(env.Stdout, "dry run: nothing was created, copied or deleted (message counts are approximate)")
	return nil
}
