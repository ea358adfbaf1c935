package kubectl

import "github.com/qinglong/ql3/verdict/argv"

// The invocation's definition lives in package argv; these names keep the runner's tests short.
var (
	buildArgv       = argv.Build
	environ         = argv.Environ
	CheckInvocation = argv.CheckInvocation
)

const (
	testCtx         = "ql3-admin"
	kubeconfigName  = argv.KubeconfigName
	CodeUnknownStep = argv.CodeUnknownStep
)
