package ceremony

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/qinglong/ql3/refuse"
	"github.com/qinglong/ql3/store"
)

// TestStoreErr: a store error that carries its own reason code keeps it; one that carries none
// (an I/O error the store did not classify) is STORE_WRITE_FAILED, naming what was being
// stored, so that no store failure reaches the operator as INTERNAL.
func TestStoreErr(t *testing.T) {
	coded := refuse.New(store.CodeObjectCorrupt, "blob sha256:00 differs")
	if got := refuse.CodeOf(storeErr(coded, "inputs")); got != store.CodeObjectCorrupt {
		t.Fatalf("a coded store error: code %s, want %s", got, store.CodeObjectCorrupt)
	}
	plain := &fs.PathError{Op: "write", Path: "tmp/stage", Err: errors.New("no space left on device")}
	err := storeErr(plain, "inputs")
	if got := refuse.CodeOf(err); got != CodeStoreWrite {
		t.Fatalf("an uncoded store error: code %s, want %s", got, CodeStoreWrite)
	}
	if !errors.Is(err, plain) {
		t.Fatalf("the cause is lost: %v", err)
	}
}
