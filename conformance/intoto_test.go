package conformance

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"

	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// TestInTotoStatementValidate: every statement ql3 signs (about a receipt and about a preflight
// report, with each key type) parses as the in-toto attestation bindings' Statement v1 and passes
// its Validate; the bundle's DSSE payload type is the in-toto one and its payload is the statement.
func TestInTotoStatementValidate(t *testing.T) {
	s, subs := subjects(t)
	cases, passed := 0, 0
	for _, k := range testKeys(t) {
		for _, sub := range subs {
			cases++
			ok := t.Run(k.name+"/"+sub.name, func(t *testing.T) {
				stmt, bundle := attested(t, s, sub.d, k.ql3)
				var st intoto.Statement
				if err := (protojson.UnmarshalOptions{}).Unmarshal(stmt, &st); err != nil {
					t.Fatalf("intoto_test.go: %s: the in-toto bindings cannot read the statement: %v\n%s", sub.name, err, stmt)
				}
				if err := st.Validate(); err != nil {
					t.Fatalf("intoto_test.go: %s: Statement.Validate: %v\n%s", sub.name, err, stmt)
				}
				if st.GetType() != intoto.StatementTypeUri {
					t.Errorf("intoto_test.go: %s: _type %q, want %q", sub.name, st.GetType(), intoto.StatementTypeUri)
				}
				if len(st.GetSubject()) != 1 || st.GetSubject()[0].GetDigest()["sha256"] != sub.d.Encoded() {
					t.Errorf("intoto_test.go: %s: subject %v, want sha256 %s", sub.name, st.GetSubject(), sub.d.Encoded())
				}
				var b struct {
					DSSEEnvelope struct {
						Payload     string `json:"payload"`
						PayloadType string `json:"payloadType"`
					} `json:"dsseEnvelope"`
				}
				if err := json.Unmarshal(bundle, &b); err != nil {
					t.Fatal(err)
				}
				if b.DSSEEnvelope.PayloadType != "application/vnd.in-toto+json" {
					t.Errorf("intoto_test.go: payloadType %q", b.DSSEEnvelope.PayloadType)
				}
				if p, err := base64.StdEncoding.DecodeString(b.DSSEEnvelope.Payload); err != nil || !bytes.Equal(p, stmt) {
					t.Errorf("intoto_test.go: the envelope's payload is not the stored statement (%v)", err)
				}
			})
			if ok {
				passed++
			}
		}
	}
	t.Logf("intoto_test.go: %d of %d statements validate", passed, cases)
}
