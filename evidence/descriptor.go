package evidence

import "github.com/opencontainers/go-digest"

// Descriptor refers to a stored object, OCI style.
type Descriptor struct {
	MediaType string        `json:"mediaType"`
	Digest    digest.Digest `json:"digest"`
	Size      int64         `json:"size"`
}
