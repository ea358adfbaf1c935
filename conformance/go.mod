module github.com/qinglong/ql3/conformance

go 1.26.0

require (
	github.com/google/go-containerregistry v0.22.1
	github.com/in-toto/attestation v1.2.0
	github.com/opencontainers/go-digest v1.0.0
	github.com/qinglong/ql3 v0.0.0-00010101000000-000000000000
	github.com/secure-systems-lab/go-securesystemslib v0.11.1
	google.golang.org/protobuf v1.36.11
)

require (
	github.com/cyberphone/json-canonicalization v0.0.0-20241213102144-19d51d7fe467 // indirect
	github.com/docker/cli v29.7.2+incompatible // indirect
	github.com/docker/docker-credential-helpers v0.9.3 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	golang.org/x/crypto v0.55.0 // indirect
	golang.org/x/mod v0.39.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	gotest.tools/v3 v3.5.2 // indirect
	oras.land/oras-go/v2 v2.7.0 // indirect
)

replace github.com/qinglong/ql3 => ../
