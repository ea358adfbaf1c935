package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/qinglong/ql3/deploylog/policy"
	"github.com/qinglong/ql3/internal/testbed/ocitest"
	"github.com/qinglong/ql3/internal/testbed/witnesstest"
)

// TestCLILogWitness: the store's signed checkpoint goes to the real litewitness with ql3 log
// witness; the cosignature kept beside it meets a policy under ql3 log verify --policy and ql3
// audit --policy, and a policy naming another witness key refuses.
func TestCLILogWitness(t *testing.T) {
	witnesstest.ToolBin(t) // skips (fails under CI=true) without the tool, before any work
	const origin = "example.com/ql3-test/cli-witness"
	dir := t.TempDir()
	st := ocitest.Materialize(t, ocitest.Store1000())
	key, vkeyFile := filepath.Join(dir, "private", "log.key"), filepath.Join(dir, "log.vkey")
	if err := os.Mkdir(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	mustRun := func(args ...string) string {
		t.Helper()
		out, errOut, code := run(t, "", args...)
		if code != 0 {
			t.Fatalf("ql3 %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	mustRun("log", "init", "--store", st, "--origin", origin)
	mustRun("log", "keygen", "--origin", origin, "--key", key, "--verifier", vkeyFile)
	mustRun("log", "sign", "--store", st, "--key", key)
	vkeyBytes, err := os.ReadFile(vkeyFile)
	if err != nil {
		t.Fatal(err)
	}
	logVKey := strings.TrimSpace(string(vkeyBytes))

	w := witnesstest.Start(t, "witness.example/ql3-cli", origin, logVKey)
	wkey := filepath.Join(dir, "witness.vkey")
	if err := os.WriteFile(wkey, []byte(w.VKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Submit: the witness cosigns from size 0; asked again it cosigns anew, the first stays.
	out := mustRun("log", "witness", "--store", st, "--witness", w.URL, "--witness-key", wkey, "-o", "json")
	var res logWitnessResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if !res.OK || !res.Stored || res.OldSize != 0 || res.Size == 0 || !strings.HasPrefix(res.Cosignatures, "— "+w.Name+" ") {
		t.Fatalf("result %+v", res)
	}
	out = mustRun("log", "witness", "--store", st, "--witness", w.URL, "--witness-key", wkey)
	if want := "from size " + strconv.FormatInt(res.Size, 10) + "): already kept"; !strings.Contains(out, want) {
		t.Fatalf("second submission: %q, want %q", out, want)
	}

	// The policy of the log key and this witness accepts the store's log and its records.
	pol := filepath.Join(dir, "policy")
	writeFile(t, pol, "log "+logVKey+"\nwitness W "+w.VKey+"\nquorum W\n")
	out = mustRun("log", "verify", "--store", st, "--policy", pol, "-o", "json")
	var rep struct {
		OK     bool `json:"ok"`
		Report struct {
			SignedSize   int64 `json:"signedSize"`
			UnsignedTail int64 `json:"unsignedTail"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Report.SignedSize != res.Size || rep.Report.UnsignedTail != 0 {
		t.Fatalf("log verify --policy: %s", out)
	}
	receipt := receiptOf(t, st)
	out = mustRun("audit", "--store", st, "--policy", pol, receipt)
	if !strings.Contains(out, "log: leaf ") {
		t.Fatalf("audit --policy states no log inclusion:\n%s", out)
	}

	// A policy that names another key for the witness: the kept cosignature is not its, and
	// nothing the log holds is quorum-cosigned.
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	stranger, err := policy.NewCosignatureVerifierFromKey(w.Name, pub)
	if err != nil {
		t.Fatal(err)
	}
	strange := filepath.Join(dir, "strange-policy")
	writeFile(t, strange, "log "+logVKey+"\nwitness W "+stranger.String()+"\nquorum W\n")
	out, errOut, code := run(t, "", "log", "verify", "--store", st, "--policy", strange)
	if code != 1 || !strings.Contains(errOut, "refused: POLICY_QUORUM") {
		t.Fatalf("log verify under a stranger's key: exit %d\n%s%s", code, out, errOut)
	}
	// The audit finds no checkpoint the policy trusts that covers the receipt's leaf.
	_, errOut, code = run(t, "", "audit", "--store", st, "--policy", strange, receipt)
	if code != 1 || !strings.Contains(errOut, "refused: LOG_UNSIGNED") {
		t.Fatalf("audit under a stranger's key: exit %d\n%s", code, errOut)
	}
	// And ql3 log witness refuses a witness whose answer is not under the key it is given.
	skey := filepath.Join(dir, "stranger.vkey")
	writeFile(t, skey, stranger.String()+"\n")
	_, errOut, code = run(t, "", "log", "witness", "--store", st, "--witness", w.URL, "--witness-key", skey)
	if code != 1 || !strings.Contains(errOut, "refused: WITNESS_COSIGNATURE") {
		t.Fatalf("log witness under a stranger's key: exit %d\n%s", code, errOut)
	}
	// A witness key file holding a log key.
	_, errOut, code = run(t, "", "log", "witness", "--store", st, "--witness", w.URL, "--witness-key", vkeyFile)
	if code != 1 || !strings.Contains(errOut, "refused: POLICY_KEY") {
		t.Fatalf("log witness with a log key: exit %d\n%s", code, errOut)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// receiptOf is the digest of the one receipt of the store-1000 copy at root.
func receiptOf(t *testing.T, root string) string {
	t.Helper()
	rep, err := ocitest.OpenStore(t, root).Verify()
	if err != nil || len(rep.Receipts) != 1 {
		t.Fatalf("store-1000 copy: %v", err)
	}
	return rep.Receipts[0].Descriptor.Digest.String()
}
