package ceremony_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/ql3/ceremony"
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/internal/testbed/testcluster"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// indexCounts counts the index entries of each kind of the store directory dir, read by path.
func indexCounts(t *testing.T, dir string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, kind := range []string{evidence.IndexPreflights, evidence.IndexIntents, evidence.IndexReceipts} {
		es, err := os.ReadDir(filepath.Join(dir, "index", kind))
		if err != nil {
			t.Fatal(err)
		}
		out[kind] = len(es)
	}
	return out
}

// verifyStore opens dir afresh, requires a clean verify and returns its report.
func verifyStore(t *testing.T, dir string) *store.Report {
	t.Helper()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer st.Close()
	rep, err := st.Verify()
	if err != nil || !rep.OK() {
		t.Fatalf("verify %s: %v %+v", dir, err, rep)
	}
	return rep
}

// TestCeremonyStoreSwappedDuringEveryStep: the store directory swapped, while a kubectl step of a
// preflight or an apply runs, for a symlink to another store (or, after a rename, to itself) is
// refused with STORE_ROOT_MOVED when the run comes to publish. Everything the run wrote is in the
// directory it opened, nothing is in the other store, no root is published for it in either, both
// verify clean, and once the directory is back in place the rerun is correct: a preflight
// publishes; an apply recovers exactly when its intent had been published before the swap (the
// swap during the apply step or later), and is a fresh apply otherwise, with the cluster not
// mutated by the refused run. The bed's cleanup then audits every root of both stores.
func TestCeremonyStoreSwappedDuringEveryStep(t *testing.T) {
	testcluster.Need(t)
	vectors := []struct {
		command string // evidence.CommandPreflight or evidence.CommandApply
		step    string // the kubectl step during which the store is swapped
		self    bool   // a symlink to the store itself (renamed) instead of to another store
		intent  bool   // the apply published its intent before the swap
	}{
		{evidence.CommandPreflight, evidence.StepIdentity, false, false},
		{evidence.CommandPreflight, evidence.StepVersion, false, false},
		{evidence.CommandPreflight, evidence.StepDryRun, false, false},
		{evidence.CommandPreflight, evidence.StepDryRun, true, false},
		{evidence.CommandApply, evidence.StepIdentity, false, false},
		{evidence.CommandApply, evidence.StepDryRun, false, false},
		{evidence.CommandApply, evidence.StepApply, false, true},
		{evidence.CommandApply, evidence.StepConvergence, false, true},
		{evidence.CommandApply, evidence.StepNamespaces, false, true},
		{evidence.CommandApply, evidence.StepIdentityFinal, false, true},
		{evidence.CommandApply, evidence.StepIdentityFinal, true, true},
	}
	for _, v := range vectors {
		name := v.command + "/" + v.step + "/other"
		if v.self {
			name = v.command + "/" + v.step + "/self"
		}
		t.Run(name, func(t *testing.T) {
			b := newBed(t, true, nil)
			other := filepath.Join(b.Dir, "other-store")
			if st, err := store.Init(other); err != nil {
				t.Fatal(err)
			} else if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			b.stores = append(b.stores, other)
			cf := b.WriteCommand("preflight.json", evidence.CommandPreflight, "")
			if v.command == evidence.CommandApply {
				pre, err := b.preflight()
				if err != nil {
					t.Fatal(err)
				}
				cf = b.applyFile(string(pre.Preflight))
			}
			before := indexCounts(t, b.Store)
			held := b.Store + ".held"
			swapped := false
			restoreHook := ceremony.SetRunHook(func(step string) {
				if step != v.step || swapped {
					return
				}
				swapped = true
				target := other
				if v.self {
					target = held
				}
				if err := os.Rename(b.Store, held); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(target, b.Store); err != nil {
					t.Error(err)
				}
			})
			res, err := ceremony.Run(context.Background(), ceremony.Options{CommandFile: cf, Progress: &b.out}, "")
			restoreHook()
			b.note(err)
			if !swapped {
				t.Fatalf("step %s never ran: %v", v.step, err)
			}
			if got := refuse.CodeOf(err); got != store.CodeRootMoved || res != nil {
				t.Fatalf("code %q, want %s (%v, %+v)", got, store.CodeRootMoved, err, res)
			}
			if r, _ := refuse.As(err); v.intent != strings.Contains(r.Hint, "partially applied") {
				t.Fatalf("hint %q: the partial-apply advice must be there exactly when the intent was", r.Hint)
			}

			// The run's evidence is in the directory it opened; nothing is published for it.
			after := indexCounts(t, held)
			wantIntents := before[evidence.IndexIntents]
			if v.intent {
				wantIntents++
			}
			if after[evidence.IndexPreflights] != before[evidence.IndexPreflights] || after[evidence.IndexReceipts] != 0 ||
				after[evidence.IndexIntents] != wantIntents {
				t.Fatalf("entries of the store opened: %v, before the run %v, want %d intents", after, before, wantIntents)
			}
			rep := verifyStore(t, held)
			if len(rep.Unreferenced) == 0 {
				t.Fatal("the refused run's exec records are not in the store it opened")
			}
			if (len(rep.Unfinished) == 1) != v.intent || len(rep.Unfinished) > 1 {
				t.Fatalf("unfinished applies: %+v", rep.Unfinished)
			}
			orep := verifyStore(t, other)
			if orep.Objects != 0 || len(orep.Preflights)+len(orep.Intents)+len(orep.Receipts) != 0 {
				t.Fatalf("the other store got %d objects, roots %+v %+v %+v", orep.Objects, orep.Preflights, orep.Intents, orep.Receipts)
			}
			if v.command == evidence.CommandApply && !v.intent && len(liveManagers(t, b.Namespace)) != 0 {
				t.Fatal("the refused apply mutated the cluster without an intent")
			}

			// The directory back in place, the rerun is correct.
			if err := os.Remove(b.Store); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(held, b.Store); err != nil {
				t.Fatal(err)
			}
			if v.command == evidence.CommandPreflight {
				if _, err := b.preflight(); err != nil {
					t.Fatalf("preflight rerun: %v", err)
				}
				if n := b.Count(evidence.IndexPreflights); n != before[evidence.IndexPreflights]+1 {
					t.Fatalf("%d preflights after the rerun", n)
				}
				return
			}
			rc, err := b.apply(cf)
			if err != nil {
				t.Fatalf("apply rerun: %v", err)
			}
			if rc.Recovered != v.intent || rc.Offline {
				t.Fatalf("rerun %+v, want recovered %v", rc, v.intent)
			}
			if b.Count(evidence.IndexReceipts) != 1 || b.Count(evidence.IndexIntents) != 1 {
				t.Fatalf("after the rerun: %v", indexCounts(t, b.Store))
			}
			if len(liveManagers(t, b.Namespace)) != 6 {
				t.Fatal("the rerun did not converge the release")
			}
		})
	}
}
