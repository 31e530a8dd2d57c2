// Package plugin is kubectl-tend, the kubectl plugin for Tend's resources:
// status reports, support bundles, and day-2 actions (backup, restore,
// pause, resume).
//
// Commands that act only create, patch or annotate Tend's resources and
// leave the work to the operator; the plugin never talks to etcd, S3 or SQS
// and never changes an object the operator owns. It reads Secrets only in
// `report`, and redacts their values unless asked not to, and with them
// ConfigMaps' values, environment variables' values and kubectl's
// last-applied-configuration.
package plugin
