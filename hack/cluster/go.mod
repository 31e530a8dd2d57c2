// The local cluster's own Go programs: imagebuild (offline OCI images FROM
// scratch, with go-containerregistry) and nodedrain (a CRI client that stops
// every pod sandbox). A module of its own, so that their dependencies stay
// out of the product's go.mod.
module github.com/tend-dev/tend/hack/cluster

go 1.26.0

require (
	github.com/google/go-containerregistry v0.22.1
	google.golang.org/grpc v1.84.0
	k8s.io/cri-api v0.37.2
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260928230214-8a89bd6388cc // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
