// Package manager assembles Tend's controller manager: it turns command-line
// options into a controller-runtime Manager with leader election, metrics,
// health probes, the webhook server (always: internal/webhook), and the
// controllers that --controllers selects.
//
// It knows nothing about any one controller. Each controller package exposes a
// Controller value, and cmd/tend hands the list to Run. Nothing here reconciles
// or talks to an upstream API.
package manager
