package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/refuse"
	"github.com/qinglong/ql3/store"
)

// Codes raised by `ql3 store`.
const (
	CodeInputRead     refuse.Code = "INPUT_READ"       // the input file or stdin cannot be read
	CodeVerifyCorrupt refuse.Code = "STORE_CORRUPT"    // store verify found corruption
	CodeNotRecord     refuse.Code = "STORE_NOT_RECORD" // store show on an object that is not a record
)

func readInput(name string) ([]byte, error) {
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(io.LimitReader(os.Stdin, store.MaxObjectSize+1))
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, &refuse.Error{Code: CodeInputRead, Class: refuse.Usage, Msg: "cannot read input", Err: err}
	}
	return b, nil
}

func init() {
	registerCommand(func(o *RootOptions) *cobra.Command {
		c := &cobra.Command{Use: "store", Short: "Manage the evidence store"}
		c.AddCommand(&cobra.Command{
			Use: "init DIR", Short: "Create a store", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, a []string) error {
				s, err := store.Init(a[0])
				if err != nil {
					return err
				}
				defer s.Close()
				return o.printResult(cmd.OutOrStdout(), map[string]any{"ok": true, "store": s.Root()}, s.Root())
			},
		})
		var mt string
		put := &cobra.Command{
			Use: "put FILE|-", Short: "Store a raw blob and print its digest", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, a []string) error {
				s, err := o.OpenStore()
				if err != nil {
					return err
				}
				defer s.Close()
				b, err := readInput(a[0])
				if err != nil {
					return err
				}
				d, err := s.PutBlob(mt, b)
				if err != nil {
					return err
				}
				return o.printResult(cmd.OutOrStdout(), map[string]any{"ok": true, "descriptor": d}, string(d.Digest))
			},
		}
		put.Flags().StringVar(&mt, "media-type", evidence.MediaTypeOctets, "media type of the blob")
		c.AddCommand(put)
		get := func(s string) ([]byte, error) {
			st, err := o.OpenStore()
			if err != nil {
				return nil, err
			}
			defer st.Close()
			d, err := evidence.ParseDigest(s)
			if err != nil {
				return nil, err
			}
			return st.Get(d)
		}
		c.AddCommand(&cobra.Command{
			Use: "cat DIGEST", Short: "Print an object's bytes after re-hashing them", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, a []string) error {
				b, err := get(a[0])
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(b)
				return err
			},
		})
		c.AddCommand(&cobra.Command{
			Use: "show DIGEST", Short: "Pretty-print a record", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, a []string) error {
				b, err := get(a[0])
				if err != nil {
					return err
				}
				if c, err := evidence.Canonicalize(b); err != nil || string(c) != string(b) {
					return refuse.New(CodeNotRecord, "object %s is not a canonical json record", a[0])
				}
				var v any
				if err := json.Unmarshal(b, &v); err != nil {
					return refuse.Wrap(CodeNotRecord, err, "object %s", a[0])
				}
				pretty, _ := json.MarshalIndent(v, "", "  ")
				return o.printResult(cmd.OutOrStdout(), map[string]any{"ok": true, "record": v}, string(pretty))
			},
		})
		c.AddCommand(&cobra.Command{
			Use: "ls", Short: "List index entries", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				s, err := o.OpenStore()
				if err != nil {
					return err
				}
				defer s.Close()
				all := []store.IndexEntry{}
				var lines []string
				for _, k := range []string{evidence.IndexPreflights, evidence.IndexIntents, evidence.IndexReceipts} {
					es, err := s.ListIndex(k)
					if err != nil {
						return err
					}
					for _, e := range es {
						all = append(all, e)
						lines = append(lines, fmt.Sprintf("%s\t%s\t%s", e.Kind, e.Key, e.Descriptor.Digest))
					}
				}
				return o.printResult(cmd.OutOrStdout(), map[string]any{"ok": true, "entries": all}, strings.Join(lines, "\n"))
			},
		})
		c.AddCommand(&cobra.Command{
			Use: "verify", Short: "Re-hash and check the whole store", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				s, err := o.OpenStore()
				if err != nil {
					return err
				}
				defer s.Close()
				r, err := s.Verify()
				if err != nil {
					return err
				}
				if o.Output != "json" {
					printVerify(cmd.OutOrStdout(), r)
				}
				if !r.OK() {
					return refuse.New(CodeVerifyCorrupt, "store has %d corruption findings", len(r.Corruption))
				}
				if o.Output == "json" {
					return o.printResult(cmd.OutOrStdout(), map[string]any{"ok": true, "report": r}, "")
				}
				return nil
			},
		})
		return c
	})
}

// printVerify prints the verify report for people: totals, the published roots, the unfinished
// applies, then every finding.
func printVerify(w io.Writer, r *store.Report) {
	fmt.Fprintf(w, "objects %d (%d bytes), receipts %d, preflights %d, intents %d, unfinished %d, unreferenced %d\n",
		r.Objects, r.Bytes, len(r.Receipts), len(r.Preflights), len(r.Intents), len(r.Unfinished), len(r.Unreferenced))
	for _, e := range r.Receipts {
		fmt.Fprintf(w, "receipt %s (apply command %s)\n", e.Descriptor.Digest, e.Key)
	}
	for _, e := range r.Preflights {
		fmt.Fprintf(w, "preflight %s\n", e.Descriptor.Digest)
	}
	for _, e := range r.Unfinished {
		fmt.Fprintf(w, "unfinished: intent %s of apply command %s has no receipt; rerun that apply command to recover\n", e.Descriptor.Digest, e.Key)
	}
	for _, f := range r.Corruption {
		fmt.Fprintf(w, "corrupt: %s: %s: %s\n", f.Code, f.Path, f.Msg)
	}
	for _, f := range r.Hints {
		fmt.Fprintf(w, "hint: %s: %s\n", f.Code, f.Path)
	}
}
