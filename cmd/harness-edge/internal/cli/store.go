package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/harness-edge/harness-edge/store"

	"github.com/spf13/cobra"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/control"
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

func newLsCmd(g *globals, stdout io.Writer) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "ls",
		Short: "List the harnesses the store holds",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return g.do(func(api *control.Conn) error {
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
				for _, e := range list {
					parent := e.ParentHarnessID
					if parent == "" {
						parent = "-"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", e.ID, e.AgentName, e.Status, parent, e.HeadSeq, e.UpdatedAt.Format("2006-01-02 15:04:05Z07:00"))
				}
				return tw.Flush()
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
			return g.withStore(func(s *store.Store) error {
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
			return g.do(func(api *control.Conn) error {
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
						fmt.Fprintf(stdout, "%s record %d: %s\n", p.ID, p.Seq, p.Reason)
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
		Short: "Write a harness's state as HarnessState JSON v1 (or, with --chain, its raw checkpoint chain)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return g.withStore(func(s *store.Store) (err error) {
				w := stdout
				if out != "" && out != "-" {
					f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
					if err != nil {
						return err
					}
					defer func() {
						if cerr := f.Close(); err == nil {
							err = cerr
						}
					}()
					w = f
				}
				if chain {
					return s.ExportChain(args[0], w)
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
	c.Flags().BoolVar(&chain, "chain", false, "export the raw checkpoint chain (for moving a harness to another device)")
	return c
}

func newImportCmd(g *globals, stdin io.Reader, stdout io.Writer) *cobra.Command {
	var replace bool
	c := &cobra.Command{
		Use:   "import FILE",
		Short: "Import a HarnessState JSON file or a chain export (- reads stdin); refuses to overwrite unless --replace",
		Args:  cobra.ExactArgs(1),
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
			return g.withStore(func(s *store.Store) error {
				if store.IsChainFile(data) {
					idx, err := s.ImportChain(data, replace)
					if err != nil {
						return err
					}
					fmt.Fprintf(stdout, "imported %s: chain of records %d..%d\n", idx.ID, idx.KeyframeSeq, idx.HeadSeq)
					return nil
				}
				st, err := statefmt.DecodeJSON(data)
				if err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				cp, err := s.ImportState(st, replace)
				if errors.Is(err, store.ErrExists) {
					return err
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "imported %s: checkpoint %d (%d bytes stored)\n", st.HarnessID, cp.Seq, cp.StoredBytes)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&replace, "replace", false, "overwrite a harness the store already holds")
	return c
}
