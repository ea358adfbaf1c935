// Package ceremony runs ql3's ceremonies against a cluster: the preflight, the apply and the live
// audit. It is the one package of ql3 that runs kubectl (through internal/kubectl) on the
// operator's behalf, and it publishes what it saw into the evidence store (package store) as the
// records of package evidence, so that an auditor can check every claim offline (package audit)
// without trusting ql3.
//
// Where to start:
//
//   - Run, Preflight, Apply and LiveAudit take Options naming a command file
//     (docs/command-file.md, parsed by evidence/command) and return a Result (LiveAuditResult);
//     a refusal is a *refuse.Error whose Code is documented in docs/reason-codes.md.
//   - Each ceremony is a table of steps (preflight.go, apply.go, liveaudit.go) run in order by
//     runSteps, one progress line each; every step either passes or refuses, and nothing after a
//     refusal runs.
//   - session.go holds what a run knows: the verified private inputs (internal/stablefile), the
//     held kubectl, the kubeconfig policy's verdict (internal/kubeconfig), the exec records.
//   - The judgments of kubectl's output live in verdict/ (convergence, kubeout, plan, argv),
//     shared with the auditor and history so that both judge the same bytes the same way.
//
// Why each check exists: docs/rationale.md (its §4 private inputs, §6 kubectl invocations, §7
// the store and §10 the live audit); how a run proceeds and recovers: docs/ceremony.md and
// docs/lifecycle.md.
package ceremony
