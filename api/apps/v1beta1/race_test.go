//go:build race

package v1beta1

// roundTrips is how many random PodSets TestRoundTrip converts each way.
// The race detector makes the reflection in filling and comparing them ten
// times slower and has nothing to find in this one goroutine, so a -race
// run (make test) converts fewer and stays within seconds.
const roundTrips = 500
