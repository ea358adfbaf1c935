package ceremony

import (
	"github.com/qinglong/ql3/evidence"
	"github.com/qinglong/ql3/evidence/command"
	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/store"
)

// Offline is what the offline checks of a command learned, for an operator to review.
type Offline struct {
	ReleaseVersion string
	CatalogCommit  string
	Resources      int
	Kubeconfig     *evidence.KubeconfigSummary
}

// CheckOffline runs every check a preflight of pc runs before its first network step, with the
// same codes: the store, the private inputs and their pins, the lock and the manifest, the
// kubeconfig policy and kubectl. It writes nothing and opens no connection. ql3 command new runs it
// so that the file it writes passes them.
func CheckOffline(pc *command.Parsed) (*Offline, error) {
	st, err := store.Open(pc.Command.Store)
	if err != nil {
		return nil, err
	}
	_ = st.Close()
	s := &session{pc: pc}
	if err := s.readFiles(); err != nil {
		return nil, err
	}
	exe, err := stablefile.OpenExecutable(pc.Command.Kubectl.Path, pc.Command.Kubectl.Digest)
	if err != nil {
		return nil, err
	}
	_ = exe.Close()
	return &Offline{ReleaseVersion: s.lock.ReleaseVersion, CatalogCommit: s.lock.CatalogCommit,
		Resources: len(s.lock.Objects), Kubeconfig: s.summary}, nil
}
