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

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/cmdkit"
	"github.com/sluicemq/sluice/internal/store/disk/format"
	"github.com/sluicemq/sluice/internal/vfs"
)

const verifyUsage = `Usage: sluice verify [--data-dir DIR] [--salvage]

Checks a data directory: reads every frame of every log segment and every
snapshot, rebuilds every queue as a start would, and reads back every live
message's body, checking its record. It prints, per queue, its messages, those
whose body cannot be read back, and why the first could not; then any damage
(data that fails its checks where it cannot be a write cut short by a crash:
a flipped bit, a bad block), with what a salvage would lose to it.

Stop the server first. The check holds the directory's lock (the file LOCK;
docs/operations.md, "The data directory's lock") while it runs: while a server
runs on the directory the check is refused at once, with exit status 1 and the
pid and host of the holder, and a server started during the check is refused
until it is done. Without --salvage the check writes nothing: it cuts no torn
tail, removes no file and frees nothing.

A server refuses to start on a damaged directory (it names the file and
offset) rather than drop what the damage holds back. --salvage keeps every
record that reads back: each damaged stretch is written over (so that the next
start reads on), what it held is counted and named (queues, messages, their
ids where they read; sluice_messages_unreadable_total), a queue whose catalog
record was lost comes back, and the check runs again on the result. Take a
copy of the directory first. ` + "`sluice serve --salvage`" + ` does the same at
a start.

Exit status 0 when nothing is damaged, every message reads back, every queue's
partition is there and a start would drop no message (after --salvage: when
the salvaged directory is so); 1 otherwise (or when the directory cannot be
read). A server started on a directory with unreadable messages counts them
(sluice_queue_unreadable_total) and deletes them; restore a backup first if
you have one.

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
	fs.StringVar(&dir, "data-dir", dir, "data directory to check (or $SLUICE_DATA_DIR); refused while a server runs on it")
	salvage := fs.Bool("salvage", false, "salvage a damaged directory first: keep every record that reads back, count and name what is lost (take a copy first)")
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
	if *salvage {
		log = slog.New(slog.DiscardHandler) // the report below says it all
	}
	rep, err := broker.Verify(broker.Config{Dir: dir, Logger: log, NoPreallocate: true, Salvage: *salvage})
	if errors.Is(err, vfs.ErrLocked) || errors.Is(err, vfs.ErrLockUnsupported) {
		return err // it names the directory
	}
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

// printVerify prints a check's report: a line per queue, the total, the
// orphans, what a salvage lost and any damage; an error when anything is
// damaged or unreadable, a partition gone, or messages a start would drop.
func printVerify(env Env, dir string, rep broker.VerifyReport) error {
	if rep.Salvaged != nil {
		printSalvage(env, "salvaged", rep.Salvaged)
		fmt.Fprintf(env.Stdout, "salvaged %s: %d stretches written over, %d messages lost; what the next start reads:\n", dir, len(rep.Salvaged.Damage), rep.Salvaged.Lost())
	}
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
		fmt.Fprintf(env.Stdout, "%d orphan partitions in %s (records of a queue whose creation or deletion was cut short, no queue's): the next start drops them", rep.Orphans, dir)
		if rep.OrphanMessages > 0 {
			fmt.Fprintf(env.Stdout, ", and the %d messages in them that no deletion accounts for", rep.OrphanMessages)
		}
		fmt.Fprintln(env.Stdout)
	}
	if rep.Damage != nil {
		printSalvage(env, "damaged", rep.Damage)
	}
	if rep.Healthy() {
		fmt.Fprintf(env.Stdout, "%s: nothing is damaged and every message reads back\n", dir)
		return nil
	}
	var why []string
	if rep.Damage != nil {
		why = append(why, fmt.Sprintf("%d damaged stretches (a start refuses the directory; sluice verify --salvage keeps every record that reads back, losing %d messages%s: take a copy first)",
			len(rep.Damage.Damage), rep.Damage.Lost(), unknownNote(rep.Damage)))
	}
	if n := rep.Unreadable(); n > 0 {
		why = append(why, fmt.Sprintf("%d of %d messages cannot be read back (a start deletes them: restore a backup first if you have one)", n, messages))
	}
	if missing > 0 {
		why = append(why, fmt.Sprintf("%d queues have lost their partition", missing))
	}
	if rep.OrphanMessages > 0 {
		why = append(why, fmt.Sprintf("a start would drop %d messages of partitions no queue owns", rep.OrphanMessages))
	}
	return fmt.Errorf("verify: %s: %s", dir, strings.Join(why, "; "))
}

// printSalvage prints what damage held: each damaged stretch, and what
// each queue lost (what = "damaged" before a salvage, "salvaged" after).
func printSalvage(env Env, what string, r *broker.SalvageReport) {
	for _, d := range r.Damage {
		where := ""
		if d.BelowFloor {
			where = ", where a start does not read"
		}
		fmt.Fprintf(env.Stdout, "%s: %s at offset %d (%d bytes%s): %s; it held %d records\n", what, d.File, d.Offset, d.Length, where, d.Reason, d.Records)
	}
	for _, q := range r.Queues {
		fmt.Fprintf(env.Stdout, "%s: %s: %d messages lost", what, q.Name, q.Messages)
		if q.WithoutBody > 0 {
			fmt.Fprintf(env.Stdout, ", %d without a body", q.WithoutBody)
		}
		if q.Snapshots+q.Records > 0 {
			fmt.Fprintf(env.Stdout, ", %d snapshot and %d other records damaged", q.Snapshots, q.Records)
		}
		if q.FromSnapshot > 0 {
			fmt.Fprintf(env.Stdout, ", %d messages read back from a damaged snapshot (their receive counts and visibility as read)", q.FromSnapshot)
		}
		if q.Deletes > 0 {
			fmt.Fprintf(env.Stdout, " (%d deletes: those messages may be delivered again)", q.Deletes)
		}
		if q.Unknown > 0 {
			fmt.Fprintf(env.Stdout, " (%d unreadable: what they held is unknown)", q.Unknown)
		}
		if len(q.IDs) > 0 {
			fmt.Fprintf(env.Stdout, "; ids as read: %s", strings.Join(q.IDs, " "))
		}
		fmt.Fprintln(env.Stdout)
	}
	for _, name := range r.Restored {
		fmt.Fprintf(env.Stdout, "%s: %s: its catalog record (or settings) was lost: brought back\n", what, name)
	}
	if r.Unknown > 0 {
		fmt.Fprintf(env.Stdout, "%s: %d stretches of which nothing could be read: what they held, and whose, is unknown\n", what, r.Unknown)
	}
}

func unknownNote(r *broker.SalvageReport) string {
	if r.Unknown > 0 {
		return " and what the unreadable stretches held"
	}
	return ""
}
