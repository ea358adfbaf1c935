package transfer

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/qinglong/ql3/internal/input"
	"github.com/qinglong/ql3/refuse"
)

// The Docker configuration is read by ql3 itself rather than by oras-go's credential store, so
// that it goes through the one bounded reader (a FIFO or a device named config.json is refused
// at once, an oversized file before it is read) and so that a credential helper's output and
// stderr never reach a message or ql3's own stderr.
const (
	// maxDockerConfig bounds config.json: a configuration with hundreds of registries is a few KiB.
	maxDockerConfig = 1 << 20
	// maxHelperOutput bounds what a credential helper's `get` may print.
	maxHelperOutput = 64 << 10
	// helperTimeout bounds a credential helper's run.
	helperTimeout = 30 * time.Second
	// helperNotFound is what a helper prints (and exits 1) when it holds nothing for the server:
	// no credentials, not a failure (the docker-credential-helpers protocol).
	helperNotFound = "credentials not found in native keychain"
)

// dockerConfig is the part of config.json ql3 reads.
type dockerConfig struct {
	Auths       map[string]dockerAuth `json:"auths"`
	CredsStore  string                `json:"credsStore"`
	CredHelpers map[string]string     `json:"credHelpers"`
	path        string
}

type dockerAuth struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// dockerConfigPath is $DOCKER_CONFIG/config.json, else ~/.docker/config.json.
func dockerConfigPath() (string, error) {
	if dir := os.Getenv("DOCKER_CONFIG"); dir != "" {
		return filepath.Join(dir, "config.json"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", refuse.Wrap(CodeCredentials, err, "locate the docker configuration (no DOCKER_CONFIG and no home directory)")
	}
	return filepath.Join(home, ".docker", "config.json"), nil
}

// loadDockerConfig reads the Docker configuration through the bounded reader. An absent file
// is no credentials; anything else that cannot be read or parsed is OCI_CREDENTIALS (and the
// input code of the read, wrapped). Messages name the file, never its content.
func loadDockerConfig() (*dockerConfig, error) {
	path, err := dockerConfigPath()
	if err != nil {
		return nil, err
	}
	b, err := input.ReadFile(path, maxDockerConfig)
	if err != nil {
		if refuse.CodeOf(err) == input.CodeNotFound {
			return &dockerConfig{path: path}, nil
		}
		return nil, refuse.Wrap(CodeCredentials, err, "read the docker configuration")
	}
	c, err := parseDockerConfig(b)
	if err != nil {
		return nil, refuse.Wrap(CodeCredentials, err, "docker configuration %s", path)
	}
	c.path = path
	return c, nil
}

// errConfigShape is the one parse error: a json error could quote a byte of the file.
var errConfigShape = errors.New("transfer: not a docker configuration (a JSON object with auths, credsStore, credHelpers)")

func parseDockerConfig(b []byte) (*dockerConfig, error) {
	var c dockerConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, errConfigShape
	}
	for _, h := range append([]string{c.CredsStore}, mapValues(c.CredHelpers)...) {
		if h != "" && !helperName.MatchString(h) {
			return nil, refuse.New(CodeCredentials, "credential helper name %s is not a plain name", refuse.Ident(h))
		}
	}
	return &c, nil
}

// helperName: a helper is docker-credential-<name> found on PATH, never a path.
var helperName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// serverKey is the key the docker configuration files hostport under.
func serverKey(hostport string) string {
	if hostport == "docker.io" || hostport == "registry-1.docker.io" {
		return "https://index.docker.io/v1/"
	}
	return hostport
}

// hostOf strips a legacy key's scheme and path ("https://registry.example/v1/").
func hostOf(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	h, _, _ := strings.Cut(key, "/")
	return h
}

// credential is the auth.CredentialFunc of the configuration: a per-registry helper, else the
// credentials store, else the auths entry. Errors are OCI_CREDENTIALS and carry no credential.
func (c *dockerConfig) credential(ctx context.Context, hostport string) (auth.Credential, error) {
	key := serverKey(hostport)
	if h := c.CredHelpers[key]; h != "" {
		return runHelper(ctx, h, key)
	}
	if c.CredsStore != "" {
		return runHelper(ctx, c.CredsStore, key)
	}
	a, ok := c.Auths[key]
	if !ok {
		for k, v := range c.Auths {
			if hostOf(k) == key {
				a, ok = v, true
				break
			}
		}
	}
	if !ok {
		return auth.EmptyCredential, nil
	}
	return a.credential(c.path)
}

func (a dockerAuth) credential(path string) (auth.Credential, error) {
	cred := auth.Credential{Username: a.Username, Password: a.Password, RefreshToken: a.IdentityToken, AccessToken: a.RegistryToken}
	if a.Auth != "" {
		raw, err := base64.StdEncoding.DecodeString(a.Auth)
		if err != nil {
			return auth.EmptyCredential, refuse.New(CodeCredentials, "docker configuration %s: an auth value is not base64", path)
		}
		user, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return auth.EmptyCredential, refuse.New(CodeCredentials, "docker configuration %s: an auth value is not user:password", path)
		}
		cred.Username, cred.Password = user, pass
	}
	return cred, nil
}

// lookPath is exec.LookPath, a variable for the tests.
var lookPath = exec.LookPath

// runHelper runs docker-credential-<name> get with the server on stdin. Its stdout is read
// (bounded) and parsed, its stderr discarded: neither reaches a message, since a failing helper
// may print anything, a secret included. A missing helper, a failure, a timeout or an answer of
// another shape are OCI_CREDENTIALS.
func runHelper(ctx context.Context, name, server string) (auth.Credential, error) {
	prog := "docker-credential-" + name
	bin, err := lookPath(prog)
	if err != nil {
		return auth.EmptyCredential, refuse.New(CodeCredentials, "credential helper %s is not on PATH", prog).
			WithHint("install it, or remove it from the docker configuration")
	}
	ctx, cancel := context.WithTimeout(ctx, helperTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "get")
	cmd.Stdin = strings.NewReader(server)
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		return auth.EmptyCredential, refuse.New(CodeCredentials, "credential helper %s could not be started", prog)
	}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return auth.EmptyCredential, refuse.New(CodeCredentials, "credential helper %s could not be started", prog)
	}
	b, rerr := io.ReadAll(io.LimitReader(out, maxHelperOutput+1))
	werr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return auth.EmptyCredential, refuse.New(CodeCredentials, "credential helper %s did not answer within %s", prog, helperTimeout)
	case rerr != nil || len(b) > maxHelperOutput:
		return auth.EmptyCredential, refuse.New(CodeCredentials, "credential helper %s printed more than %d bytes", prog, maxHelperOutput)
	case werr != nil:
		if string(bytes.TrimSpace(b)) == helperNotFound {
			return auth.EmptyCredential, nil
		}
		// The exit status only: the helper's output is never quoted.
		var ee *exec.ExitError
		if errors.As(werr, &ee) {
			return auth.EmptyCredential, refuse.New(CodeCredentials, "credential helper %s failed (exit status %d); its output is not shown", prog, ee.ExitCode())
		}
		return auth.EmptyCredential, refuse.New(CodeCredentials, "credential helper %s failed; its output is not shown", prog)
	}
	var v struct {
		Username string `json:"Username"`
		Secret   string `json:"Secret"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Secret == "" {
		return auth.EmptyCredential, refuse.New(CodeCredentials, "credential helper %s answered something other than {\"Username\",\"Secret\"}; its output is not shown", prog)
	}
	if v.Username == "<token>" {
		return auth.Credential{RefreshToken: v.Secret}, nil
	}
	return auth.Credential{Username: v.Username, Password: v.Secret}, nil
}
