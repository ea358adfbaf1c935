package transfer

// Repository exposes the configured client to the tests, which push hand-made manifests.
var Repository = repository
