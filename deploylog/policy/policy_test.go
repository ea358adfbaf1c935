package policy

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/refuse"
)

// testWitness is a witness key made at test time, with the signing side that only tests need.
type testWitness struct {
	name string
	priv ed25519.PrivateKey
	v    *CosignatureVerifier
}

func newTestWitness(t testing.TB, name string) testWitness {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewCosignatureVerifierFromKey(name, pub)
	if err != nil {
		t.Fatal(err)
	}
	return testWitness{name: name, priv: priv, v: v}
}

// cosign returns the witness's cosignature line over a note text, signed at time ts (the
// c2sp.org/tlog-cosignature construction, written here independently of CosignatureVerifier).
func (w testWitness) cosign(text string, ts uint64) string {
	msg := fmt.Sprintf("cosignature/v1\ntime %d\n%s", ts, text)
	sig := ed25519.Sign(w.priv, []byte(msg))
	h := sha256.Sum256(append([]byte(w.name+"\n\x04"), w.priv.Public().(ed25519.PublicKey)...))
	b := append(h[:4:4], binary.BigEndian.AppendUint64(nil, ts)...)
	b = append(b, sig...)
	return "— " + w.name + " " + base64.StdEncoding.EncodeToString(b) + "\n"
}

// testLog is a log key made at test time.
type testLog struct {
	origin string
	s      note.Signer
	vkey   string
}

func newTestLog(t testing.TB, origin string) testLog {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return testLog{origin: origin, s: s, vkey: vkey}
}

// checkpoint returns a signed checkpoint of size n (any root: the policy judges signatures).
func (l testLog) checkpoint(t testing.TB, n int) (text string, signed []byte) {
	t.Helper()
	root := sha256.Sum256([]byte(fmt.Sprint(n)))
	text = fmt.Sprintf("%s\n%d\n%s\n", l.origin, n, base64.StdEncoding.EncodeToString(root[:]))
	signed, err := note.Sign(&note.Note{Text: text}, l.s)
	if err != nil {
		t.Fatal(err)
	}
	return text, signed
}

func wantCode(t testing.TB, err error, code refuse.Code) {
	t.Helper()
	if got := refuse.CodeOf(err); got != code {
		t.Fatalf("got %v (code %q), want code %s", err, got, code)
	}
}

func TestCosignatureVerifierKey(t *testing.T) {
	w := newTestWitness(t, "witness.example/w1")
	vkey := w.v.String()
	v, err := NewCosignatureVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	if v.Name() != w.name || v.KeyHash() != w.v.KeyHash() || v.String() != vkey {
		t.Fatalf("round trip of %s gave %s", vkey, v)
	}
	// The key ID is the spec's, computed here from scratch.
	h := sha256.Sum256(append([]byte(w.name+"\n\x04"), w.priv.Public().(ed25519.PublicKey)...))
	if want := fmt.Sprintf("%s+%x+", w.name, h[:4]); !strings.HasPrefix(vkey, want) {
		t.Fatalf("vkey %s does not start with %s", vkey, want)
	}
	log := newTestLog(t, "example.com/log")
	name, rest, _ := strings.Cut(vkey, "+")
	_, b64, _ := strings.Cut(rest, "+")
	raw, _ := base64.StdEncoding.DecodeString(b64)
	mlDSA := append([]byte{0x06}, raw[1:]...)
	vectors := []struct {
		name string
		vkey string // the key to parse
	}{
		{"log key as witness key", log.vkey},
		{"wrong key ID", name + "+00000000+" + b64},
		{"upper-case key ID", strings.ToUpper(vkey[:strings.LastIndex(vkey, "+")]) + vkey[strings.LastIndex(vkey, "+"):]},
		{"another name", "other.example+" + rest},
		{"ML-DSA type", name + "+" + rest[:8] + "+" + base64.StdEncoding.EncodeToString(mlDSA)},
		{"short key", name + "+" + rest[:8] + "+" + base64.StdEncoding.EncodeToString(raw[:20])},
		{"no name", "+" + rest},
		{"spaced name", "a b+" + rest},
		{"not base64", name + "+" + rest[:8] + "+***"},
		{"base64 with extra padding", name + "+" + rest[:8] + "+" + b64 + "=="},
		{"empty", ""},
	}
	for _, vec := range vectors {
		t.Run(vec.name, func(t *testing.T) {
			_, err := NewCosignatureVerifier(vec.vkey)
			wantCode(t, err, CodeKey)
			if strings.Contains(err.Error(), b64) {
				t.Fatalf("the message repeats the key material: %v", err)
			}
		})
	}
}

func TestCosignatureVerify(t *testing.T) {
	w := newTestWitness(t, "witness.example/w1")
	l := newTestLog(t, "example.com/log")
	text, _ := l.checkpoint(t, 7)
	line := w.cosign(text, 1700000000)
	raw, _ := base64.StdEncoding.DecodeString(strings.Fields(line)[2])
	sig := raw[4:]
	if !w.v.Verify([]byte(text), sig) {
		t.Fatal("a valid cosignature does not verify")
	}
	if ts, ok := CosignatureTimestamp(note.Signature{Base64: strings.Fields(line)[2]}); !ok || ts != 1700000000 {
		t.Fatalf("timestamp %d %v", ts, ok)
	}
	other, _ := l.checkpoint(t, 8)
	bumped := append([]byte(nil), sig...)
	bumped[7]++ // the timestamp is signed
	flipped := append([]byte(nil), sig...)
	flipped[20] ^= 1
	huge := append([]byte(nil), sig...)
	huge[0] = 0x80 // beyond 2^63-1
	for name, c := range map[string]struct {
		text string
		sig  []byte
	}{
		"other checkpoint":  {other, sig},
		"other timestamp":   {text, bumped},
		"flipped signature": {text, flipped},
		"timestamp > 2^63":  {text, huge},
		"short":             {text, sig[:70]},
		"plain note sig":    {text, sig[8:]},
	} {
		if w.v.Verify([]byte(c.text), c.sig) {
			t.Errorf("%s: verifies", name)
		}
	}
}

// policyText builds a policy of one log and the given witnesses, then the extra lines.
func policyText(l testLog, ws []testWitness, extra string) string {
	var b strings.Builder
	b.WriteString("# test policy\nlog " + l.vkey + " https://log.example/\n\n")
	for i, w := range ws {
		fmt.Fprintf(&b, "witness W%d %s\n", i+1, w.v)
	}
	b.WriteString(extra)
	return b.String()
}

func TestParseSpecExample(t *testing.T) {
	l := newTestLog(t, "example.com/log")
	var ws []testWitness
	for i := range 6 {
		ws = append(ws, newTestWitness(t, fmt.Sprintf("w%d.example", i)))
	}
	text := "log " + l.vkey + "\n\n" +
		"witness X1 " + ws[0].v.String() + "\nwitness X2 " + ws[1].v.String() + "\n\twitness   X3\t" + ws[2].v.String() + "  \n" +
		"group X-witnesses 2 X1 X2 X3\n\n" +
		"witness Y1 " + ws[3].v.String() + "\nwitness Y2 " + ws[4].v.String() + "\nwitness Y3 " + ws[5].v.String() + " https://y3.example/\n" +
		"  # a comment\ngroup Y-witnesses any Y1 Y2 Y3\n\ngroup X-and-Y all X-witnesses Y-witnesses\nquorum X-and-Y"
	p, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Logs) != 1 || len(p.Witnesses) != 6 || len(p.Groups) != 3 || p.Quorum != "X-and-Y" {
		t.Fatalf("parsed %+v", p)
	}
	if g := p.Groups[2]; g.Threshold != 2 || p.Groups[1].Threshold != 1 || p.Groups[0].Threshold != 2 {
		t.Fatalf("thresholds %+v", p.Groups)
	}
	if w, _ := p.Witness("Y3"); w.URL != "https://y3.example/" {
		t.Fatalf("Y3 URL %q", w.URL)
	}
	again, err := Parse(p.Marshal())
	if err != nil || string(again.Marshal()) != string(p.Marshal()) {
		t.Fatalf("marshal does not round trip: %v\n%s", err, p.Marshal())
	}

	_, signed := l.checkpoint(t, 10)
	cp := strings.SplitN(string(signed), "\n\n", 2)[0] + "\n"
	sigOf := func(idx ...int) []byte {
		out := string(signed)
		for _, i := range idx {
			out += ws[i].cosign(cp, 1700000000+uint64(i))
		}
		return []byte(out)
	}
	vectors := []struct {
		name  string
		cosig []int // indexes of the witnesses that cosign
		met   bool
	}{
		{"nobody", nil, false},
		{"two X only", []int{0, 1}, false},
		{"one Y only", []int{4}, false},
		{"one X one Y", []int{0, 3}, false},
		{"two X one Y", []int{0, 2, 5}, true},
		{"all", []int{0, 1, 2, 3, 4, 5}, true},
		{"same X twice and a Y", []int{0, 0, 3}, false},
	}
	for _, vec := range vectors {
		t.Run(vec.name, func(t *testing.T) {
			r, err := p.Evaluate(sigOf(vec.cosig...))
			if err != nil {
				t.Fatal(err)
			}
			if r.QuorumMet != vec.met {
				t.Fatalf("met %v, want %v (cosigned %v)", r.QuorumMet, vec.met, r.Witnesses())
			}
			_, err = p.Check(sigOf(vec.cosig...))
			if vec.met && err != nil {
				t.Fatal(err)
			}
			if !vec.met {
				wantCode(t, err, CodeQuorum)
			}
		})
	}
}

func TestParseRefusals(t *testing.T) {
	l := newTestLog(t, "example.com/log")
	w1, w2 := newTestWitness(t, "w1.example"), newTestWitness(t, "w2.example")
	ws := []testWitness{w1, w2}
	sameKey, _ := NewCosignatureVerifierFromKey("other.example", w1.priv.Public().(ed25519.PublicKey))
	d := strings.SplitN(newTestLog(t, "d.example").vkey, "+", 3)
	badLogKeyID := d[0] + "+00000000+" + d[2]
	vectors := []struct {
		name string
		text string      // the whole policy file
		code refuse.Code // the refusal Parse must return
	}{
		{"no quorum", policyText(l, ws, ""), CodeMalformed},
		{"two quorums", policyText(l, ws, "quorum W1\nquorum W2\n"), CodeMalformed},
		{"quorum undefined", policyText(l, ws, "quorum W9\n"), CodeMalformed},
		{"quorum before its group", policyText(l, ws, "quorum G\ngroup G any W1\n"), CodeMalformed},
		{"group member undefined", policyText(l, ws, "group G any W1 W3\nquorum G\n"), CodeMalformed},
		{"group member twice", policyText(l, ws, "group G 2 W1 W1\nquorum G\n"), CodeMalformed},
		{"group of none", policyText(l, ws, "group G any none\nquorum G\n"), CodeMalformed},
		{"group without members", policyText(l, ws, "group G any\nquorum G\n"), CodeMalformed},
		{"threshold zero", policyText(l, ws, "group G 0 W1 W2\nquorum G\n"), CodeMalformed},
		{"threshold above n", policyText(l, ws, "group G 3 W1 W2\nquorum G\n"), CodeMalformed},
		{"threshold leading zero", policyText(l, ws, "group G 01 W1 W2\nquorum G\n"), CodeMalformed},
		{"threshold signed", policyText(l, ws, "group G +1 W1 W2\nquorum G\n"), CodeMalformed},
		{"threshold word", policyText(l, ws, "group G some W1 W2\nquorum G\n"), CodeMalformed},
		{"group named like a witness", policyText(l, ws, "group W1 any W2\nquorum W1\n"), CodeMalformed},
		{"witness named none", policyText(l, nil, "witness none "+w1.v.String()+"\nquorum none\n"), CodeMalformed},
		{"witness name twice", policyText(l, nil, "witness A "+w1.v.String()+"\nwitness A "+w2.v.String()+"\nquorum A\n"), CodeMalformed},
		{"witness key twice under another name", policyText(l, ws, "witness W3 "+sameKey.String()+"\nquorum W1\n"), CodeMalformed},
		{"log key twice", policyText(l, ws, "log "+l.vkey+"\nquorum W1\n"), CodeMalformed},
		{"log with two URLs", policyText(l, ws, "log "+newTestLog(t, "b").vkey+" u1 u2\nquorum W1\n"), CodeMalformed},
		{"witness without key", policyText(l, ws, "witness W3\nquorum W1\n"), CodeMalformed},
		{"unknown keyword", policyText(l, ws, "witnesses W3\nquorum W1\n"), CodeMalformed},
		{"carriage return", policyText(l, ws, "quorum W1\r\n"), CodeMalformed},
		{"NUL byte", policyText(l, ws, "quorum W1\n\x00"), CodeMalformed},
		{"DEL byte", policyText(l, ws, "# \x7f\nquorum W1\n"), CodeMalformed},
		{"vertical tab as space", policyText(l, ws, "quorum\vW1\n"), CodeMalformed},
		{"too large", policyText(l, ws, "quorum W1\n"+strings.Repeat("#\n", MaxPolicySize)), CodeMalformed},
		{"witness key is a log key", policyText(l, ws, "witness W3 "+newTestLog(t, "c").vkey+"\nquorum W1\n"), CodeKey},
		{"log key is a witness key", policyText(l, ws, "log "+w1.v.String()+"\nquorum W1\n"), CodeKey},
		{"log key with a bad key ID", policyText(l, ws, "log "+badLogKeyID+"\nquorum W1\n"), CodeKey},
	}
	for _, vec := range vectors {
		t.Run(vec.name, func(t *testing.T) {
			_, err := Parse([]byte(vec.text))
			wantCode(t, err, vec.code)
		})
	}
	// The line is named.
	_, err := Parse([]byte(policyText(l, ws, "group G 3 W1 W2\nquorum G\n")))
	if !strings.Contains(err.Error(), "policy line 6:") {
		t.Fatalf("no line number: %v", err)
	}
}

func TestParseLimits(t *testing.T) {
	l := newTestLog(t, "example.com/log")
	var b strings.Builder
	b.WriteString("log " + l.vkey + "\n")
	var names []string
	for i := range 32 {
		w := newTestWitness(t, fmt.Sprintf("w%d.example", i))
		fmt.Fprintf(&b, "witness W%d %s\n", i, w.v)
		names = append(names, fmt.Sprintf("W%d", i))
	}
	for i := range 32 {
		fmt.Fprintf(&b, "group G%d %d %s\n", i, i+1, strings.Join(names, " "))
	}
	b.WriteString("group all all " + strings.Join(func() []string {
		var g []string
		for i := range 32 {
			g = append(g, fmt.Sprintf("G%d", i))
		}
		return g
	}(), " ") + "\nquorum all\n")
	p, err := Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Witnesses) != 32 || len(p.Groups) != 33 {
		t.Fatalf("%d witnesses %d groups", len(p.Witnesses), len(p.Groups))
	}
}

func TestEvaluate(t *testing.T) {
	l := newTestLog(t, "example.com/log")
	w1, w2, stranger := newTestWitness(t, "w1.example"), newTestWitness(t, "w2.example"), newTestWitness(t, "w1.example")
	p, err := Parse([]byte(policyText(l, []testWitness{w1, w2}, "group G all W1 W2\nquorum G\n")))
	if err != nil {
		t.Fatal(err)
	}
	text, signed := l.checkpoint(t, 42)

	// A quorum.
	r, err := p.Check([]byte(string(signed) + w2.cosign(text, 5) + w1.cosign(text, 6)))
	if err != nil {
		t.Fatal(err)
	}
	if r.Origin != l.origin || r.Size != 42 || r.Log != l.origin || len(r.Cosigned) != 2 || r.Cosigned[0].Witness != "W2" || r.Cosigned[1].Timestamp != 6 {
		t.Fatalf("result %+v", r)
	}

	// A witness of the same name with another key: its line is ignored, not counted.
	r, err = p.Check([]byte(string(signed) + w1.cosign(text, 5) + stranger.cosign(text, 6)))
	wantCode(t, err, CodeQuorum)
	if r.Ignored != 1 || len(r.Cosigned) != 1 || !strings.Contains(err.Error(), "cosigned by W1 (1 lines of unknown keys ignored)") {
		t.Fatalf("result %+v: %v", r, err)
	}

	// No cosignature at all.
	_, err = p.Check(signed)
	wantCode(t, err, CodeQuorum)

	// A policy witness's line that does not verify: over another checkpoint.
	otherText, _ := l.checkpoint(t, 43)
	_, err = p.Evaluate([]byte(string(signed) + w1.cosign(otherText, 5) + w2.cosign(text, 5)))
	wantCode(t, err, CodeCosignatureInvalid)

	// The checkpoint signed by another log key of the same origin.
	impostor := newTestLog(t, l.origin)
	_, forged := impostor.checkpoint(t, 42)
	_, err = p.Evaluate([]byte(string(forged) + w1.cosign(text, 5) + w2.cosign(text, 5)))
	wantCode(t, err, CodeLogSignature)

	// A policy log key whose name is not the checkpoint's origin.
	renamed := strings.Replace(string(signed), l.origin+"\n42", "example.com/other\n42", 1)
	_, err = p.Evaluate([]byte(renamed))
	wantCode(t, err, CodeLogSignature)

	// The log's own signature broken.
	broken := []byte(strings.Replace(string(signed), "\n42\n", "\n43\n", 1))
	_, err = p.Evaluate(broken)
	wantCode(t, err, CodeLogSignature)

	// Trailing garbage and no signature block.
	_, err = p.Evaluate([]byte(string(signed) + "garbage\n"))
	wantCode(t, err, CodeNoteMalformed)
	_, err = p.Evaluate([]byte(text))
	wantCode(t, err, CodeNoteMalformed)
	_, err = p.Evaluate(make([]byte, MaxNoteSize+1))
	wantCode(t, err, CodeNoteMalformed)

	// quorum none needs only the log.
	none, err := Parse([]byte("log " + l.vkey + "\nquorum none\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := none.Check(signed); err != nil {
		t.Fatal(err)
	}
}

func TestVerifier(t *testing.T) {
	l := newTestLog(t, "example.com/log")
	w1 := newTestWitness(t, "w1.example")
	p, err := Parse([]byte(policyText(l, []testWitness{w1}, "quorum W1\n")))
	if err != nil {
		t.Fatal(err)
	}
	text, signed := l.checkpoint(t, 9)
	cosigned := []byte(string(signed) + w1.cosign(text, 1))
	c, err := Verifier{Policy: p, Origin: l.origin}.VerifyCheckpoint(cosigned)
	if err != nil || c.Size != 9 || c.Origin != l.origin {
		t.Fatalf("%+v %v", c, err)
	}
	_, err = Verifier{Policy: p}.VerifyCheckpoint(signed)
	wantCode(t, err, CodeQuorum)
	_, err = Verifier{Policy: p, Origin: "example.com/other"}.VerifyCheckpoint(cosigned)
	wantCode(t, err, deploylog.CodeOrigin)
	// deploylog's strict grammar applies first: a size with a leading zero.
	_, err = Verifier{Policy: p}.VerifyCheckpoint([]byte(strings.Replace(string(cosigned), "\n9\n", "\n09\n", 1)))
	wantCode(t, err, deploylog.CodeCheckpointMalformed)
}
