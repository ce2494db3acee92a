package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice"
	"github.com/sluicemq/sluice/internal/cmdkit"
	"github.com/sluicemq/sluice/internal/store/disk/format"
)

const verifyUsage = `Usage: sluice verify [--data-dir DIR]

Checks a data directory: rebuilds every queue as a start would and reads back
every live message's body, checking its record. It prints, per queue, its
messages, those whose body cannot be read back, and why the first could not.

Stop the server first: no server may run on the directory while it is checked
(the check reads what a running server may be writing, and, as a start does,
cuts a torn tail and removes half-written temporary files). The check frees,
drops and deletes nothing else.

Exit status 0 when every message reads back and every queue's partition is
there, 1 otherwise (or when the directory cannot be read). A server started on
a directory with unreadable messages counts them (sluice_queue_unreadable_total)
and deletes them; restore a backup first if you have one.

Flags:
`

func verify(_ context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprint(env.Stderr, verifyUsage)
		fs.PrintDefaults()
	}
	dir := env.Getenv("SLUICE_DATA_DIR")
	if dir == "" {
		dir = "./sluice-data"
	}
	fs.StringVar(&dir, "data-dir", dir, "data directory to check (or $SLUICE_DATA_DIR); no server may run on it")
	pos, err := cmdkit.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("verify: unexpected argument %q", pos[0])
	}
	// Opening a store creates what is missing: check first that there is
	// a data directory to verify, so a typo is not answered "healthy".
	if err := isDataDir(dir); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rep, err := sluice.Verify(sluice.Config{Dir: dir, Logger: log, NoPreallocate: true})
	if err != nil {
		return fmt.Errorf("verify %s: %w", dir, err)
	}
	return printVerify(env, dir, rep)
}

// isDataDir reports why dir is not a data directory a server has written:
// missing, not a directory, or without a log segment.
func isDataDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("data directory %s does not exist (--data-dir, SLUICE_DATA_DIR)", dir)
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	es, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range es {
		if _, ok := format.ParseSegName(e.Name()); ok {
			return nil
		}
	}
	return fmt.Errorf("%s holds no log segment (log-*.seg): not a Sluice data directory", dir)
}

// printVerify prints a check's report: a line per queue, the total and
// the orphans; an error when a message is unreadable or a partition gone.
func printVerify(env Env, dir string, rep sluice.VerifyReport) error {
	var rows [][]string
	messages, missing := 0, 0
	for _, q := range rep.Queues {
		messages += q.Messages
		if q.Missing {
			missing++
		}
		rows = append(rows, []string{q.Name, strconv.Itoa(q.Messages), strconv.Itoa(q.Unreadable), dash(q.FirstError)})
	}
	cmdkit.Table(env.Stdout, []string{"QUEUE", "MESSAGES", "UNREADABLE", "FIRST ERROR"}, rows)
	fmt.Fprintf(env.Stdout, "total: %d queues, %d messages, %d unreadable\n", len(rep.Queues), messages, rep.Unreadable())
	if rep.Orphans > 0 {
		fmt.Fprintf(env.Stdout, "%d orphan partitions in %s (records of a queue whose creation or deletion was cut short, no queue's): the next start drops them\n", rep.Orphans, dir)
	}
	if rep.Healthy() {
		fmt.Fprintf(env.Stdout, "%s: every message reads back\n", dir)
		return nil
	}
	var why []string
	if n := rep.Unreadable(); n > 0 {
		why = append(why, fmt.Sprintf("%d of %d messages cannot be read back (a start deletes them: restore a backup first if you have one)", n, messages))
	}
	if missing > 0 {
		why = append(why, fmt.Sprintf("%d queues have lost their partition", missing))
	}
	return fmt.Errorf("verify: %s: %s", dir, strings.Join(why, "; "))
}
