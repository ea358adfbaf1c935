package convergence_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/manifest"
	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/verdict/argv"
	"github.com/qinglong/ql3/verdict/convergence"
)

// nsJSON is a Namespace as kubectl get namespace -o=json prints it; deleting adds the
// deletionTimestamp a delete sets.
func nsJSON(name, phase string, deleting bool) string {
	del := ""
	if deleting {
		del = `"deletionTimestamp":"2026-12-05T04:00:00Z",`
	}
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"creationTimestamp":"2026-12-05T03:00:00Z",%s"labels":{"kubernetes.io/metadata.name":%q},"name":%q,"resourceVersion":"42","uid":"0b3c2a4e-5d6f-4a7b-8c9d-0e1f2a3b4c5d"},"spec":{"finalizers":["kubernetes"]},"status":{"phase":%q}}`,
		del, name, name, phase)
}

func nsList(items ...string) string {
	return `{"apiVersion":"v1","items":[` + strings.Join(items, ",") + `],"kind":"List","metadata":{"resourceVersion":""}}`
}

func TestReadNamespaces(t *testing.T) {
	two := []string{"qinglong", "team-b"}
	vectors := []struct {
		name        string      // what the read shows
		names       []string    // the namespaces the read named
		out         string      // its stdout
		code        refuse.Code // the refusal of ReadNamespaces, "" when it parses
		terminating []bool      // per namespace, when it parses
	}{
		{"one active (kubectl prints the object)", two[:1], nsJSON("qinglong", "Active", false), "", []bool{false}},
		{"two active (kubectl prints a List)", two, nsList(nsJSON("qinglong", "Active", false), nsJSON("team-b", "Active", false)), "", []bool{false, false}},
		{"one deleted, phase Terminating", two, nsList(nsJSON("qinglong", "Active", false), nsJSON("team-b", "Terminating", true)), "", []bool{false, true}},
		{"deletionTimestamp set, phase still Active", two[:1], nsJSON("qinglong", "Active", true), "", []bool{true}},
		{"phase Terminating without deletionTimestamp", two[:1], nsJSON("qinglong", "Terminating", false), "", []bool{true}},
		{"one namespace missing from the List", two, nsList(nsJSON("qinglong", "Active", false)), convergence.CodeNamespaceRead, nil},
		{"a namespace shown twice", two, nsList(nsJSON("qinglong", "Active", false), nsJSON("qinglong", "Active", false)), convergence.CodeNamespaceRead, nil},
		{"out of order", two, nsList(nsJSON("team-b", "Active", false), nsJSON("qinglong", "Active", false)), convergence.CodeNamespaceRead, nil},
		{"another namespace", two[:1], nsJSON("default", "Active", false), convergence.CodeNamespaceRead, nil},
		{"no phase", two[:1], strings.Replace(nsJSON("qinglong", "Active", false), `"status":{"phase":"Active"}`, `"status":{}`, 1), convergence.CodeNamespaceRead, nil},
		{"unknown phase", two[:1], nsJSON("qinglong", "Gone", false), convergence.CodeNamespaceRead, nil},
		{"no uid", two[:1], strings.Replace(nsJSON("qinglong", "Active", false), `"uid":"0b3c2a4e-5d6f-4a7b-8c9d-0e1f2a3b4c5d"`, `"uid":""`, 1), convergence.CodeNamespaceRead, nil},
		{"not a Namespace", two[:1], strings.Replace(nsJSON("qinglong", "Active", false), `"kind":"Namespace"`, `"kind":"ConfigMap"`, 1), convergence.CodeNamespaceRead, nil},
		{"another api version", two[:1], strings.Replace(nsJSON("qinglong", "Active", false), `"apiVersion":"v1"`, `"apiVersion":"v2"`, 1), convergence.CodeNamespaceRead, nil},
		{"duplicate key", two[:1], strings.Replace(nsJSON("qinglong", "Active", false), `"phase":"Active"`, `"phase":"Terminating","phase":"Active"`, 1), convergence.CodeNamespaceRead, nil},
		{"empty", two[:1], "", convergence.CodeNamespaceRead, nil},
		{"trailing data", two[:1], nsJSON("qinglong", "Active", false) + "{}", convergence.CodeNamespaceRead, nil},
		{"names not sorted", []string{"team-b", "qinglong"}, nsList(nsJSON("team-b", "Active", false), nsJSON("qinglong", "Active", false)), convergence.CodeNamespaceRead, nil},
		{"no names", nil, nsList(), convergence.CodeNamespaceRead, nil},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			nss, err := convergence.ReadNamespaces(v.names, []byte(v.out))
			if got := refuse.CodeOf(err); got != v.code {
				t.Fatalf("code %q, want %q: %v", got, v.code, err)
			}
			if err != nil {
				return
			}
			for i, ns := range nss {
				if ns.Name != v.names[i] || ns.Terminating != v.terminating[i] || ns.UID == "" {
					t.Fatalf("namespace %d: %+v", i, ns)
				}
			}
			wantErr := slices.Contains(v.terminating, true)
			if err := convergence.CheckNamespaces(nss); (refuse.CodeOf(err) == convergence.CodeNamespaceTerminating) != wantErr || (err != nil) != wantErr {
				t.Fatalf("CheckNamespaces: %v", err)
			}
		})
	}
}

func TestOutsideNamespaces(t *testing.T) {
	objs := []manifest.Object{
		{APIVersion: "v1", Kind: "Namespace", Name: "held"},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "held", Name: "a"},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-b", Name: "b"},
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "qinglong", Name: "c"},
		{APIVersion: "v1", Kind: "ConfigMap", Name: "d"}, // no namespace in the manifest: the server's default
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "e"},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "gone", Name: "f"},
	}
	live := []evidence.LiveObject{
		{Kind: "Namespace", Name: "held", UID: "u0"},
		{Kind: "ConfigMap", Namespace: "held", Name: "a", UID: "u1"},
		{Kind: "ConfigMap", Namespace: "team-b", Name: "b", UID: "u2"},
		{Kind: "Deployment", Namespace: "qinglong", Name: "c", UID: "u3"},
		{Kind: "ConfigMap", Namespace: "default", Name: "d", UID: "u4"},
		{Kind: "ClusterRole", Name: "e", UID: "u5"},
		{Kind: "ConfigMap", Namespace: "gone", Name: "f"}, // missing: not read
	}
	got, err := convergence.OutsideNamespaces(objs, live)
	if err != nil || !slices.Equal(got, []string{"default", "qinglong", "team-b"}) {
		t.Fatalf("OutsideNamespaces = %q, %v", got, err)
	}
	if got, err := convergence.OutsideNamespaces(objs[:1], live[:2]); err != nil || got != nil {
		t.Fatalf("every namespace held: %q, %v", got, err)
	}
	bad := slices.Clone(live)
	bad[2].Namespace = "--all-namespaces"
	if _, err := convergence.OutsideNamespaces(objs, bad); refuse.CodeOf(err) != convergence.CodeNamespaceRead {
		t.Fatalf("a namespace that is no DNS label: %v", err)
	}
}

func TestJudgeNamespaces(t *testing.T) {
	fs := []convergence.Finding{
		{Object: evidence.LiveObject{Namespace: "qinglong", Name: "a", UID: "u1"}, Verdict: evidence.VerdictConverged},
		{Object: evidence.LiveObject{Namespace: "qinglong", Name: "b", UID: "u2"}, Verdict: evidence.VerdictFieldDiffers, Code: convergence.CodeFieldDiffers},
		{Object: evidence.LiveObject{Namespace: "qinglong", Name: "c", UID: "u3"}, Verdict: evidence.VerdictAddedByOther, Code: convergence.CodeAddedByOther, Path: "x"},
		{Object: evidence.LiveObject{Namespace: "team-b", Name: "d", UID: "u4"}, Verdict: evidence.VerdictConverged},
		{Object: evidence.LiveObject{Namespace: "qinglong", Name: "e"}, Verdict: evidence.VerdictMissing},
	}
	convergence.JudgeNamespaces(fs, []convergence.Namespace{{Name: "qinglong", UID: "n1", Phase: "Terminating", Terminating: true}, {Name: "team-b", UID: "n2", Phase: "Active"}})
	want := []string{evidence.VerdictUnreadable, evidence.VerdictFieldDiffers, evidence.VerdictUnreadable, evidence.VerdictConverged, evidence.VerdictMissing}
	for i, f := range fs {
		if f.Verdict != want[i] {
			t.Errorf("finding %d: %s, want %s", i, f.Verdict, want[i])
		}
	}
	if fs[0].Code != convergence.CodeNamespaceTerminating || fs[2].Code != convergence.CodeNamespaceTerminating || fs[2].Path != "" || !strings.Contains(fs[0].Detail, "qinglong") {
		t.Fatalf("terminating findings: %+v %+v", fs[0], fs[2])
	}
}

// FuzzReadNamespaces: whatever the parser accepts is one Namespace per name asked, in order, each
// with a uid and a known phase; whatever it refuses carries CONVERGENCE_NAMESPACE_READ.
func FuzzReadNamespaces(f *testing.F) {
	f.Add("qinglong", nsJSON("qinglong", "Active", false))
	f.Add("qinglong,team-b", nsList(nsJSON("qinglong", "Active", false), nsJSON("team-b", "Terminating", true)))
	f.Add("qinglong,team-b", nsList(nsJSON("qinglong", "Active", false)))
	f.Add("qinglong", `{}`)
	if m, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzReadNamespaces", "*")); len(m) == 0 {
		f.Fatal("committed seed corpus testdata/fuzz/FuzzReadNamespaces is missing")
	}
	f.Fuzz(func(t *testing.T, joined, out string) {
		names := strings.Split(joined, ",")
		nss, err := convergence.ReadNamespaces(names, []byte(out))
		if err != nil {
			if refuse.CodeOf(err) != convergence.CodeNamespaceRead {
				t.Fatalf("refusal with code %q: %v", refuse.CodeOf(err), err)
			}
			return
		}
		if !argv.ValidOperands(names) || len(nss) != len(names) {
			t.Fatalf("accepted %d namespaces for %q", len(nss), names)
		}
		for i, ns := range nss {
			if ns.Name != names[i] || ns.UID == "" || (ns.Phase != "Active" && ns.Phase != "Terminating") || (ns.Phase == "Terminating" && !ns.Terminating) {
				t.Fatalf("accepted %+v for %s", ns, names[i])
			}
		}
		if err := convergence.CheckNamespaces(nss); (err != nil) != slices.ContainsFunc(nss, func(n convergence.Namespace) bool { return n.Terminating }) {
			t.Fatalf("CheckNamespaces: %v", err)
		}
	})
}
