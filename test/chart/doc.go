// Package chart tests the Helm chart (dist/chart) with real Helm: every
// values file in dist/chart/ci renders objects that decode, and with the
// default values the chart renders exactly what `kubectl kustomize
// config/default` does, so the two cannot drift. `make test-chart` runs it
// with HELM and KUBECTL set to the pinned tools (build tag chart).
package chart
