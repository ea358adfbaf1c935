package kubeconfig

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/qinglong/ql3/refuse"
)

// files is a readFile over a map, for the file references of the vectors.
func files(m map[string]string) func(string, int64) ([]byte, error) {
	return func(p string, _ int64) ([]byte, error) {
		if b, ok := m[p]; ok {
			return []byte(b), nil
		}
		return nil, refuse.Wrap("INPUT_NOT_FOUND", os.ErrNotExist, "%s does not exist", p)
	}
}

const extractSrc = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.example:6443", certificate-authority: ca.pem}
- name: b
  cluster: {server: "https://b.example:6443", certificate-authority-data: Qg==, insecure-skip-tls-verify: true}
users:
- name: ua
  user: {client-certificate: /abs/cert.pem, client-key: key.pem}
- name: ub
  user: {token: tok-secret}
- name: ue
  user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: aws}}
contexts:
- name: ca
  context: {cluster: a, user: ua}
- name: cb
  context: {cluster: b, user: ub}
- name: ce
  context: {cluster: a, user: ue}
`

func TestExtract(t *testing.T) {
	read := files(map[string]string{"/dir/ca.pem": "CA-SECRET", "/abs/cert.pem": "CERT-SECRET", "/dir/key.pem": "KEY-SECRET"})
	vectors := []struct {
		context string      // the context to extract
		code    refuse.Code // "" for success
	}{
		{"ca", ""},
		{"cb", CodeInsecure},         // the result must pass the policy
		{"ce", CodeExecForbidden},    // the chosen user runs a plugin
		{"nope", CodeContextMissing}, // not there
		{"", CodeContextMissing},     // none named
	}
	for _, v := range vectors {
		x, err := Extract([]byte(extractSrc), v.context, "/dir", read)
		if v.code != "" {
			if got := refuse.CodeOf(err); got != v.code {
				t.Errorf("%q: code %q (%v), want %s", v.context, got, err, v.code)
			}
			if err != nil && bytes.Contains([]byte(err.Error()), []byte("SECRET")) {
				t.Errorf("%q: message carries a credential: %v", v.context, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", v.context, err)
		}
		if len(x.Inlined) != 3 || x.Summary.Context != "ca" || x.Summary.User != "ua" {
			t.Fatalf("%q: %+v %+v", v.context, x.Inlined, x.Summary)
		}
		// Only the chosen entries, and the data inlined.
		for _, gone := range []string{"tok-secret", "https://b.example", "aws", "name: ub", "name: ce"} {
			if bytes.Contains(x.Raw, []byte(gone)) {
				t.Errorf("extracted kubeconfig still holds %q", gone)
			}
		}
		if _, err := Check(x.Raw, "ca"); err != nil {
			t.Fatalf("extracted kubeconfig fails the policy: %v", err)
		}
	}
	// A referenced file that cannot be read is refused with its own code, the cause kept.
	_, err := Extract([]byte(extractSrc), "ca", "/elsewhere", read)
	if refuse.CodeOf(err) != CodeExtractFileRef || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unreadable reference: %v", err)
	}
}

// FuzzExtract: whatever the bytes, Extract returns a refusal or a kubeconfig that passes Check,
// and never panics.
func FuzzExtract(f *testing.F) {
	if corpus, _ := filepath.Glob("testdata/fuzz/FuzzExtract/*"); len(corpus) == 0 {
		f.Fatal("the committed corpus testdata/fuzz/FuzzExtract is gone")
	}
	f.Add([]byte(extractSrc), "ca")
	seeds, _ := filepath.Glob("testdata/*.yaml") // besides the committed corpus under testdata/fuzz/FuzzExtract
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b, "c")
		}
	}
	read := files(map[string]string{"/dir/ca.pem": "CA", "/abs/cert.pem": "CERT", "/dir/key.pem": "KEY"})
	f.Fuzz(func(t *testing.T, raw []byte, context string) {
		x, err := Extract(raw, context, "/dir", read)
		if err != nil {
			if _, ok := refuse.As(err); !ok {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		if _, err := Check(x.Raw, context); err != nil {
			t.Fatalf("extracted kubeconfig fails the policy: %v", err)
		}
	})
}
