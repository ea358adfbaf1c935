package ceremony

// Test hooks for the external test package (ceremony_test), which can import the auditor.

// SetAfterStep sets the hook called after each kubectl step returned and was recorded; it
// returns a function that restores the previous hook.
func SetAfterStep(f func(step string)) (restore func()) {
	old := afterStep
	afterStep = f
	return func() { afterStep = old }
}

// SetRunHook sets the hook called before each kubectl run.
func SetRunHook(f func(step string)) (restore func()) {
	old := runHook
	runHook = f
	return func() { runHook = old }
}
