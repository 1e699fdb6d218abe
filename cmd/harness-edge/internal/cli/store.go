package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/harness-edge/harness-edge/store"

	"github.com/spf13/cobra"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

func (g *globals) openStore() (*store.Store, error) {
	dir, err := g.storeDir()
	if err != nil {
		return nil, err
	}
	return store.OpenStore(dir, store.StoreOptions{})
}

// withStore opens the store for one command and closes it after.
func (g *globals) withStore(f func(*store.Store) error) error {
	s, err := g.openStore()
	if err != nil {
		return err
	}
	defer s.Close()
	return f(s)
}

// withStoreRead is withStore for a command that only reads: the store is opened with
// store.OpenToRead (read-only, unless it has no database yet or a megabyte of log to recover).
func (g *globals) withStoreRead(f func(*store.Store) error) error {
	dir, err := g.storeDir()
	if err != nil {
		return err
	}
	s, err := store.OpenToRead(dir)
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
				tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tAGENT\tSTATUS\tPARENT\tCHECKPOINTS\tUPDATED")
				var damaged []string
				for _, e := range list {
					parent := e.ParentHarnessID
					if parent == "" {
						parent = "-"
					}
					status := string(e.Status)
					if e.Damaged != "" {
						status = "DAMAGED"
						damaged = append(damaged, e.Damaged)
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
			return g.withStoreRead(func(s *store.Store) error {
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
				tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
				fmt.Fprintln(tw, "SEQ\tKIND\tBASE\tPREFIX\tRAW\tSTORED\tSTATE HASH\tCHAIN HASH\t")
				for _, r := range rep.Records {
					fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t\n", r.Seq, r.Kind, r.BaseSeq, r.Prefix, r.RawBytes, r.StoredBytes, r.StateHash, r.ChainHash)
				}
				tw.Flush()
				fmt.Fprintf(stdout, "%d records, %d raw bytes, %d stored bytes\n", len(rep.Records), rep.RawBytes, rep.StoredBytes)
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
					return exitError{ExitError, fmt.Errorf("verify found %d problem(s)", len(probs))}
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
			return g.withStoreRead(func(s *store.Store) (err error) {
				w := stdout
				if out != "" && out != "-" {
					f, oerr := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
					if oerr != nil {
						return oerr
					}
					defer func() { // err is the command's result
						if cerr := f.Close(); err == nil {
							err = cerr
						}
						if err != nil {
							os.Remove(out) // no half-written export left behind
						}
					}()
					w = f
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

// isJSONState reports whether an import file is a JSON state rather than an export: JSON
// starts with '{' (after white space); anything else goes to the export reader, which names
// what is wrong with it.
func isJSONState(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
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
			if !isJSONState(data) {
				return g.withStore(func(s *store.Store) error {
					sum, err := s.Import(data, store.ImportOptions{Replace: replace, CheckTask: func(id string, raw []byte) error {
						_, err := task.Parse("the stored task of harness "+id, raw)
						return err
					}})
					if err != nil {
						return fmt.Errorf("%s: %w", args[0], err)
					}
					subs := len(sum.Harnesses) - 1
					fmt.Fprintf(stdout, "imported %s with %d sub-agent(s): %d records, %d events", sum.Root, subs, sum.Records, sum.Events)
					if len(sum.Named) > 0 {
						fmt.Fprintf(stdout, ", named checkpoints %s", strings.Join(sum.Named, ", "))
					}
					if len(sum.Replaced) > 0 {
						fmt.Fprintf(stdout, "; replaced %s", strings.Join(sum.Replaced, ", "))
					}
					fmt.Fprintln(stdout)
					return nil
				})
			}
			st, err := statefmt.DecodeJSON(data)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			return g.withStore(func(s *store.Store) error {
				_, notHeld := s.Index(st.HarnessID)
				cp, err := s.ImportState(st, replace)
				if err != nil {
					return err
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
