//go:build !race

package v1beta1

// roundTrips is how many random PodSets TestRoundTrip converts each way.
const roundTrips = 3000
