package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/harness-edge/harness-edge/internal/idlist"
	"github.com/harness-edge/harness-edge/store"
	"github.com/harness-edge/harness-edge/store/trust"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// direct is a command that reads or writes the store's files itself (inspect, export,
// import) rather than asking the process that owns the store, as the others do. While another
// process owns the store, it is refused, saying who owns it and what to do.
type direct struct {
	name string // the command, as the user types it
	does string // what it does with the store's files: "reads", "writes"
	// meanwhile is what works through the owner meanwhile ("" when nothing does).
	meanwhile string
}

// open opens the store in dir with open, or says why it cannot. A store held by a process
// that serves no control socket (a command holds it for a moment, an owner is starting) is
// waited for, up to 3 s, as the other commands wait.
func (d direct) open(dir string, open func(string) (*store.Store, error)) (*store.Store, error) {
	for try := 0; ; try++ {
		s, err := open(dir)
		var inUse *store.InUseError
		if err == nil || !errors.As(err, &inUse) {
			return s, err
		}
		if trust.CheckDir(dir) == nil {
			if c, derr := control.Dial(dir); derr == nil {
				return nil, d.refusal(dir, c.Owner)
			}
		}
		if try >= 30 {
			return nil, fmt.Errorf("%w: %s is in use by pid %s, which does not answer on the store's control socket, and %s %s the store's files itself: run it again once that process has ended",
				store.ErrStoreInUse, dir, inUse.PID, d.name, d.does)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// refusal says that the store in dir is owned by owner, that the command cannot go through it,
// and what the user can do.
func (d direct) refusal(dir string, owner control.Health) error {
	then := ""
	if d.meanwhile != "" {
		then = "; meanwhile " + d.meanwhile
	}
	if owner.Owner == control.OwnerDaemon {
		return fmt.Errorf("%w: %s is owned by the harness-edge daemon (pid %d), and %s %s the store's files itself, not through the daemon: "+
			"stop the daemon (`kill %d`: it pauses what runs, and the next `harness-edge serve` resumes it), run %s, then start the daemon again%s",
			store.ErrStoreInUse, dir, owner.PID, d.name, d.does, owner.PID, d.name, then)
	}
	running := "no harness running yet"
	if len(owner.Running) > 0 {
		running = "running " + strings.Join(owner.Running, ", ")
	}
	return fmt.Errorf("%w: %s is owned by a foreground `harness-edge run` (pid %d, %s), and %s %s the store's files itself: "+
		"wait for the run to end, or pause it with `harness-edge pause ID`, then run %s again%s",
		store.ErrStoreInUse, dir, owner.PID, running, d.name, d.does, d.name, then)
}

// withStore opens the store for one command that writes it itself (d) and closes it after.
func (g *globals) withStore(d direct, f func(*store.Store) error) error {
	dir, err := g.storeDir()
	if err != nil {
		return err
	}
	s, err := d.open(dir, func(dir string) (*store.Store, error) { return store.OpenStore(dir, store.StoreOptions{}) })
	if err != nil {
		return err
	}
	defer s.Close()
	return f(s)
}

// withStoreRead is withStore for a command that only reads: the store is opened with
// store.OpenToRead (read-only, unless it has no database yet or a megabyte of log to recover).
func (g *globals) withStoreRead(d direct, f func(*store.Store) error) error {
	dir, err := g.storeDir()
	if err != nil {
		return err
	}
	s, err := d.open(dir, store.OpenToRead)
	if err != nil {
		return err
	}
	defer s.Close()
	return f(s)
}

func newLsCmd(g *globals, stdout io.Writer) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "ls",
		Short: "List the harnesses the store holds",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return g.read(func(api *control.Conn) error {
				list, err := api.List(context.Background())
				if err != nil {
					return err
				}
				if asJSON {
					if list == nil {
						list = []store.IndexEntry{}
					}
					return writeJSON(stdout, list)
				}
				tw := newColumns(stdout)
				fmt.Fprintln(tw, "ID\tAGENT\tSTATUS\tPARENT\tCHECKPOINTS\tUPDATED")
				var damaged, orphans, waiting []string
				for _, e := range list {
					parent := e.ParentHarnessID
					if parent == "" {
						parent = "-"
					}
					status := string(e.Status)
					if e.Damaged != "" {
						status = "DAMAGED"
						damaged = append(damaged, e.Damaged)
					} else if e.WaitingForRoom {
						status += " (waiting for room)"
						waiting = append(waiting, e.ID)
					} else if orphaned(api, e.Status) {
						status = "running (no process)"
						if e.ParentHarnessID == "" { // a sub-agent goes on with its parent
							orphans = append(orphans, e.ID)
						}
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", e.ID, e.AgentName, status, parent, e.HeadSeq, e.UpdatedAt.Format("2006-01-02 15:04:05Z07:00"))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				for _, d := range damaged {
					fmt.Fprintf(stdout, "\n%s (see `harness-edge verify`)", d)
				}
				if len(damaged) > 0 {
					fmt.Fprintln(stdout)
				}
				if len(orphans) > 0 {
					fmt.Fprintf(stdout, "\nrunning (no process): the process that ran %s was killed or lost power; `harness-edge resume ID` goes on from its last checkpoint\n",
						idlist.Join(orphans, ", "))
				}
				if len(waiting) > 0 {
					fmt.Fprintf(stdout, "\nwaiting for room: the store's disk is full; the daemon goes on with %s from its last checkpoint once there is room\n",
						idlist.Join(waiting, ", "))
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return c
}

// InspectRecord is one line of `inspect --json`.
type InspectRecord struct {
	Seq         uint64 `json:"seq"`
	Kind        string `json:"kind"`
	BaseSeq     uint64 `json:"baseSeq"`
	Prefix      uint64 `json:"prefix"`
	RawBytes    uint64 `json:"rawBytes"`
	StoredBytes int    `json:"storedBytes"`
	Compression string `json:"compression"`
	StateHash   string `json:"stateHash"`
	ChainHash   string `json:"chainHash"`
}

// InspectReport is what `inspect --json` prints.
type InspectReport struct {
	ID          string          `json:"id"`
	Backend     bridge.Backend  `json:"engine"`
	Records     []InspectRecord `json:"records"`
	RawBytes    uint64          `json:"rawBytes"`
	StoredBytes int             `json:"storedBytes"`
}

func newInspectCmd(g *globals, stdout io.Writer) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "inspect ID",
		Short: "Show a harness's checkpoint chain: seq, kind, raw and stored bytes, hashes, totals",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			d := direct{name: "inspect", does: "reads", meanwhile: fmt.Sprintf("`harness-edge checkpoints %[1]s` and `harness-edge verify %[1]s` go through it", args[0])}
			return g.withStoreRead(d, func(s *store.Store) error {
				recs, err := s.Inspect(args[0])
				if err != nil {
					return err
				}
				rep := InspectReport{ID: args[0], Backend: s.Engine().Backend(), Records: []InspectRecord{}}
				for _, r := range recs {
					rep.Records = append(rep.Records, InspectRecord{Seq: r.Seq, Kind: r.Kind.String(), BaseSeq: r.BaseSeq, Prefix: r.Prefix,
						RawBytes: r.RawLen, StoredBytes: r.StoredBytes, Compression: r.Compression.String(),
						StateHash: fmt.Sprintf("%016x", r.StateHash), ChainHash: fmt.Sprintf("%016x", r.ChainHash)})
					rep.RawBytes += r.RawLen
					rep.StoredBytes += r.StoredBytes
				}
				if asJSON {
					return writeJSON(stdout, rep)
				}
				tw := &columns{w: stdout, right: true}
				fmt.Fprintln(tw, "SEQ\tKIND\tBASE\tPREFIX\tRAW\tSTORED\tSTATE HASH\tCHAIN HASH\t")
				for _, r := range rep.Records {
					fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t\n", r.Seq, r.Kind, r.BaseSeq, r.Prefix, r.RawBytes, r.StoredBytes, r.StateHash, r.ChainHash)
				}
				tw.Flush()
				fmt.Fprintf(stdout, "%s, %d raw bytes, %d stored bytes\n", plural(len(rep.Records), "record"), rep.RawBytes, rep.StoredBytes)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return c
}

func newVerifyCmd(g *globals, stdout io.Writer) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "verify [ID]",
		Short: "Replay every stored chain (or one harness's) and check every hash; exit 1 on any problem",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			return g.read(func(api *control.Conn) error {
				probs, err := api.Verify(context.Background(), id)
				if err != nil {
					return err
				}
				if asJSON {
					if probs == nil {
						probs = []store.Problem{}
					}
					if err := writeJSON(stdout, probs); err != nil {
						return err
					}
				} else {
					for _, p := range probs {
						switch {
						case p.ID == "":
							fmt.Fprintf(stdout, "store: %s\n", p.Reason)
						case p.Seq == 0:
							fmt.Fprintf(stdout, "%s: %s\n", p.ID, p.Reason)
						default:
							fmt.Fprintf(stdout, "%s record %d: %s\n", p.ID, p.Seq, p.Reason)
						}
					}
				}
				if len(probs) > 0 {
					return exitError{ExitError, fmt.Errorf("verify found %s", plural(len(probs), "problem"))}
				}
				if !asJSON {
					fmt.Fprintln(stdout, "verify: every chain replays and every hash matches")
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return c
}

func newExportCmd(g *globals, stdout io.Writer) *cobra.Command {
	var out string
	var chain bool
	c := &cobra.Command{
		Use:   "export ID",
		Short: "Write a harness's state as HarnessState JSON v1 (a snapshot to read), or with --chain the harness and its sub-agents to move to another store",
		Long: `export writes a harness's state as HarnessState JSON v1: a snapshot of one harness for
reading, for 'state check' or for editing (it has no task and no event log).

export --chain writes what moving the harness to another store takes: the harness and every
sub-agent, each with its index entry, task, checkpoint records and event log, checksummed
throughout. 'harness-edge import FILE' on the other store restores it, and the harness goes
on there (approve, resume, stop, events) as it would have here. A sub-agent moves with its
parent: export the parent.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if chain && (out == "" || out == "-") && isTTY(stdout) {
				return usageError{errors.New("export --chain writes a binary file, which a terminal would show as garbage and control sequences: give -o FILE, or send standard output to a file or a pipe (`> FILE`, `| harness-edge --store DIR import -`)")}
			}
			d := direct{name: "export", does: "reads"}
			if !chain {
				d.meanwhile = fmt.Sprintf("`harness-edge show %s --json` prints the same state through it", args[0])
			}
			return g.withStoreRead(d, func(s *store.Store) (err error) {
				w := stdout
				if out != "" && out != "-" {
					o, oerr := createOutput(out)
					if oerr != nil {
						return oerr
					}
					defer func() { err = o.finish(err) }() // err is the command's result
					w = o.f
				}
				if chain {
					_, err := s.Export(args[0], w)
					return err
				}
				st, err := s.Restore(args[0])
				if err != nil {
					return err
				}
				b, err := statefmt.EncodeJSON(st)
				if err != nil {
					return err
				}
				_, err = w.Write(b)
				return err
			})
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "write to FILE instead of standard output")
	c.Flags().BoolVar(&chain, "chain", false, "export the harness with its sub-agents, tasks, checkpoint records, event logs and named checkpoints (to move it to another store)")
	return c
}

// isTTY reports whether w (or the file under the termWriter the commands write to) is a
// terminal, not merely a character device, as /dev/null is.
func isTTY(w io.Writer) bool {
	if t, ok := w.(*termWriter); ok {
		w = t.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// output is the file export -o writes. A regular file (or one that does not exist yet) is
// written beside itself under a temporary name and renamed over it only once the export is
// whole and synced: a refused or failed export leaves the file that was there as it was, and
// no half-written one. Anything else (a device such as /dev/null, a pipe) is written directly.
type output struct {
	f      *os.File
	target string // the file the temporary one replaces; "" when f is written directly
}

func createOutput(path string) (*output, error) {
	target := path
	fi, err := os.Stat(path)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		return &output{f: f}, nil
	case err == nil:
		if target, err = filepath.EvalSymlinks(path); err != nil {
			return nil, err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*.tmp")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = &fs.PathError{Op: "create", Path: path, Err: pe.Err}
		}
		return nil, err
	}
	return &output{f: f, target: target}, nil
}

// finish ends the output after a command that returned err: with none, the export takes the
// file's place; otherwise the temporary file goes. It returns the command's result.
func (o *output) finish(err error) error {
	if o.target == "" {
		if cerr := o.f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if err == nil {
		err = o.f.Sync()
	}
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(o.f.Name(), o.target)
	}
	if err != nil {
		os.Remove(o.f.Name())
	}
	return err
}

// isJSONState reports whether an import file is a JSON state rather than an export: JSON
// starts with '{' (after white space); anything else goes to the export reader, which names
// what is wrong with it.
func isJSONState(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

// stateText is the text of a file that may be a JSON state (import, state check). One that
// starts with a byte-order mark, as an editor on Windows may save a state it changed (UTF-8
// with the mark, or UTF-16), is read as a task file is (task.DecodeText): without the mark, as
// UTF-8, or refused naming the encoding. Any other is returned as it is, for the state or
// export reader to say what it is.
func stateText(name string, data []byte) ([]byte, error) {
	if task.HasByteOrderMark(data) {
		return task.DecodeText(name, "state file", data)
	}
	return data, nil
}

func newImportCmd(g *globals, stdin io.Reader, stdout io.Writer) *cobra.Command {
	var replace bool
	c := &cobra.Command{
		Use:   "import FILE",
		Short: "Import an export made with 'export --chain', or a HarnessState JSON file (- reads stdin); refuses to overwrite unless --replace",
		Long: `import restores an export made with 'export --chain': the harness and its sub-agents, with
their tasks, checkpoint records, event logs and named checkpoints. Every checksum is checked
and every chain replayed before anything is written, and everything is written at once: after
a refusal or a failure the store is as it was. With --replace, the harness and its sub-agents
already in the store are replaced, event logs and named checkpoints included.

A HarnessState JSON file becomes a new harness with that state (no task: it can be shown,
inspected and exported, not resumed). With --replace over a harness of the same task, the
state becomes the harness's next checkpoint: its task and event log are kept.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var data []byte
			var err error
			if args[0] == "-" {
				data, err = io.ReadAll(stdin)
			} else {
				data, err = os.ReadFile(args[0])
			}
			if err != nil {
				return err
			}
			if data, err = stateText(args[0], data); err != nil {
				return err
			}
			if !isJSONState(data) {
				return g.withStore(direct{name: "import", does: "writes"}, func(s *store.Store) error {
					sum, err := s.Import(data, store.ImportOptions{Replace: replace, CheckTask: func(id string, raw []byte) error {
						_, err := task.Parse("the stored task of harness "+id, raw)
						return err
					}})
					if err != nil {
						return fmt.Errorf("%s: %w", args[0], err)
					}
					subs := len(sum.Harnesses) - 1
					fmt.Fprintf(stdout, "imported %s with %s: %s, %s", sum.Root, plural(subs, "sub-agent"), plural(sum.Records, "record"), plural(sum.Events, "event"))
					if len(sum.Named) > 0 {
						fmt.Fprintf(stdout, ", named checkpoints %s", idlist.Join(sum.Named, ", "))
					}
					if len(sum.Replaced) > 0 {
						fmt.Fprintf(stdout, "; replaced %s", idlist.Join(sum.Replaced, ", "))
					}
					fmt.Fprintln(stdout)
					return nil
				})
			}
			st, err := statefmt.DecodeJSON(data)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			return g.withStore(direct{name: "import", does: "writes"}, func(s *store.Store) error {
				_, notHeld := s.Index(st.HarnessID)
				cp, err := s.ImportState(st, replace)
				if err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				if notHeld == nil {
					fmt.Fprintf(stdout, "replaced the state of %s: checkpoint %d (%d bytes stored); its task and event log are kept\n", st.HarnessID, cp.Seq, cp.StoredBytes)
					return nil
				}
				fmt.Fprintf(stdout, "imported %s: checkpoint %d (%d bytes stored)\n", st.HarnessID, cp.Seq, cp.StoredBytes)
				fmt.Fprintf(stdout, "note: a JSON state has no task: %s can be shown, inspected and exported, not resumed (to move a harness, use 'export --chain')\n", st.HarnessID)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&replace, "replace", false, "replace a harness the store already holds (with an export: with its sub-agents and event logs)")
	return c
}
