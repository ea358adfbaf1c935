package policy

import (
	"github.com/qinglong/ql3/deploylog"
	"github.com/qinglong/ql3/refuse"
)

// Verifier trusts a signed checkpoint that is one strict checkpoint note (deploylog's grammar)
// of the log origin Origin ("" accepts any policy log's) and meets the policy's quorum: the
// deploylog.CheckpointVerifier of `log verify --policy` and `audit --policy`.
type Verifier struct {
	Policy *Policy
	Origin string
}

var _ deploylog.CheckpointVerifier = Verifier{}

// VerifyCheckpoint implements deploylog.CheckpointVerifier.
func (v Verifier) VerifyCheckpoint(msg []byte) (deploylog.Checkpoint, error) {
	c, _, err := deploylog.ParseSignedCheckpoint(msg)
	if err != nil {
		return deploylog.Checkpoint{}, err
	}
	if v.Origin != "" && c.Origin != v.Origin {
		return deploylog.Checkpoint{}, refuse.New(deploylog.CodeOrigin, "checkpoint of origin %s, the log's origin is %s", refuse.Ident(c.Origin), refuse.Ident(v.Origin))
	}
	if _, err := v.Policy.Check(msg); err != nil {
		return deploylog.Checkpoint{}, err
	}
	return c, nil
}
