package attest_test

import (
	"testing"

	"github.com/qinglong/ql3/attest"
	"github.com/qinglong/ql3/audit"
)

// BenchmarkAttest: deriving, storing, signing and indexing one attestation of the 3.4.1 receipt.
func BenchmarkAttest(b *testing.B) {
	for _, kind := range []string{"p256", "ed25519"} {
		b.Run(kind, func(b *testing.B) {
			fx := newFixture(b)
			k, _, _ := signer(b, kind)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := attest.Attest(fx.st, fx.receipts[0].Digest, k, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerify: what ql3 audit --key adds to the audit of the 3.4.1 receipt (one attestation),
// beside the audit itself for scale (goal: under 5 ms added).
func BenchmarkVerify(b *testing.B) {
	for _, kind := range []string{"p256", "ed25519"} {
		b.Run(kind, func(b *testing.B) {
			fx := newFixture(b)
			k, pub, _ := signer(b, kind)
			if _, err := attest.Attest(fx.st, fx.receipts[0].Digest, k, opts); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if res, err := attest.Verify(fx.st, fx.receipts[0].Digest, []*attest.PublicKey{pub}); err != nil || res.Verified != 1 {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("audit-itself", func(b *testing.B) {
		fx := newFixture(b)
		for b.Loop() {
			if rep, err := audit.Audit(fx.st, fx.receipts[0].Digest); err != nil || !rep.OK {
				b.Fatal(err)
			}
		}
	})
}
