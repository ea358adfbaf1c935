package attest

import (
	"errors"
	"io"
	"os"
	"syscall"

	"github.com/qinglong/ql3/internal/stablefile"
	"github.com/qinglong/ql3/refuse"
)

// readPublicFile is the one place a public (not private) named file is read: a public key given
// to the verifier. It refuses what is not a regular file and reads at most ceiling bytes, with the
// stable-file codes. A shared bounded named-file reader can replace this function whole.
var readPublicFile = func(path string, ceiling int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, refuse.New(stablefile.CodeNotFound, "public key %s does not exist", path)
	}
	if err != nil {
		return nil, &refuse.Error{Code: stablefile.CodeIO, Msg: "public key " + path + " cannot be opened", Err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &refuse.Error{Code: stablefile.CodeIO, Msg: "public key " + path + " cannot be stated", Err: err}
	}
	if !st.Mode().IsRegular() {
		return nil, refuse.New(stablefile.CodeNotRegular, "public key %s is not a regular file", path)
	}
	if st.Size() > ceiling {
		return nil, refuse.New(stablefile.CodeTooLarge, "public key %s is %d bytes, over the ceiling of %d", path, st.Size(), ceiling)
	}
	b, err := io.ReadAll(io.LimitReader(f, ceiling+1))
	if err != nil {
		return nil, &refuse.Error{Code: stablefile.CodeIO, Msg: "public key " + path + " cannot be read", Err: err}
	}
	if int64(len(b)) > ceiling {
		return nil, refuse.New(stablefile.CodeTooLarge, "public key %s grew past the ceiling of %d bytes while it was read", path, ceiling)
	}
	return b, nil
}
