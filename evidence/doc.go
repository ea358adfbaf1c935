// Package evidence defines what ql3 stores as evidence and how it is named: the records
// (command, input, kubeconfig summary, exec, preflight report, apply intent, receipt, live-audit
// report, plan, attestation statement), their media types and schemas, the OCI-style Descriptor
// by which one object refers to another, and the canonical JSON (RFC 8785, wrapped by a strict
// validator) whose SHA-256 is a record's identity. It reads and writes no file and runs nothing:
// the store (package store) keeps the bytes, the ceremony (package ceremony) produces them, and
// the auditor (package audit) and history (package history) read them back.
//
// Where to start:
//
//   - records.go and lifecycle.go: the record types, one per schema; docs/records.md states
//     each field.
//   - record.go: MarshalRecord (canonical bytes of a record), DecodeRecord (strict decoding that
//     refuses unknown, duplicate and non-canonical input), Descriptors (the references a record
//     makes), TargetDigest (the identity an apply shares with its preflight).
//   - jcs.go and strict.go: the canonical form and what is refused before it (docs/jcs.md).
//   - closure.go: every object a root record reaches, as the auditor and the OCI push walk it.
//   - Subpackages: command (the command file, docs/command-file.md), lock (the lock report v2
//     verifier, docs/lock-v2.md), manifest (the manifest as kubectl reads it).
//
// Why records look the way they do: docs/rationale.md (§3 the command file, §7 the evidence
// store, §8 offline audit).
package evidence
