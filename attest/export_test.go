package attest

// SignPAEForTest lets the tests forge bundles a holder of k could make.
func SignPAEForTest(k *SigningKey, payloadType string, payload []byte) []byte {
	sig, err := k.signPAE(payloadType, payload)
	if err != nil {
		panic(err)
	}
	return sig
}
