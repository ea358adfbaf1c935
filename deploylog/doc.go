// Package deploylog is the pure core of ql3's deployment log (docs/rationale.md#13-the-deployment-log, docs/log.md): the leaf
// record, RFC 6962 tree hashing (golang.org/x/mod/sumdb/tlog), C2SP tlog-checkpoint text as
// signed notes (golang.org/x/mod/sumdb/note), inclusion and consistency proofs, and C2SP
// tlog-proof files. It does no i/o: the store writes the log, the offline auditor and the
// witness client judge its bytes with this package alone.
package deploylog

import "github.com/qinglong/ql3/refuse"

// Reason codes raised by this package.
const (
	CodeLeafCorrupt         refuse.Code = "LOG_LEAF_CORRUPT"         // a leaf is not one canonical leaf record
	CodeCheckpointMalformed refuse.Code = "LOG_CHECKPOINT_MALFORMED" // a checkpoint or its note does not parse
	CodeCheckpointSig       refuse.Code = "LOG_CHECKPOINT_SIGNATURE" // no valid signature of the log key on a checkpoint
	CodeOrigin              refuse.Code = "LOG_ORIGIN"               // a checkpoint of another log origin
	CodeProofMalformed      refuse.Code = "LOG_PROOF_MALFORMED"      // a tlog-proof file does not parse
	CodeInclusion           refuse.Code = "LOG_INCLUSION"            // an inclusion proof does not lead to the checkpoint's root
	CodeProofRecord         refuse.Code = "LOG_PROOF_RECORD"         // a tlog-proof proves another record
	CodeConsistency         refuse.Code = "LOG_CONSISTENCY"          // a consistency proof between two checkpoints fails
	CodeRollback            refuse.Code = "LOG_ROLLBACK"             // the log is smaller than a checkpoint it must extend
	CodeFork                refuse.Code = "LOG_FORK"                 // the log does not extend a checkpoint of its size or smaller
	CodeKey                 refuse.Code = "LOG_KEY"                  // a note signer or verifier key does not parse
)
