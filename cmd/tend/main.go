// Command tend is Tend's one binary.
//
//	tend manager   runs the controllers (leader election, metrics, probes)
//	               and the conversion webhook
//
// Run "tend COMMAND -h" for a command's flags.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/rest"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/tend-dev/tend/internal/controller/etcdbackup"
	"github.com/tend-dev/tend/internal/controller/etcdcluster"
	"github.com/tend-dev/tend/internal/controller/podset"
	"github.com/tend-dev/tend/internal/controller/queue"
	"github.com/tend-dev/tend/internal/manager"
	"github.com/tend-dev/tend/internal/podspec"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run executes one subcommand and returns the process exit code.
func run(args []string, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	var err error
	switch args[0] {
	case "manager":
		err = runManager(args[1:], stderr)
	case "backup", "fetch", "verify", "restore", "artifact", "check", "recover", "join-check", "replay", "prune":
		return runAgent(args[0], args[1:], stderr)
	case "archive":
		return runArchive(args[1:], stderr)
	case "-h", "-help", "--help", "help":
		usage(stderr)
		return 0
	default:
		fmt.Fprintf(stderr, "tend: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "tend %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: tend COMMAND [flags]

Commands:
  manager   run the Tend controllers

Agents (the steps of backup, restore, roll and recovery Jobs):
  backup            stream an etcd snapshot to S3 or a file, and read it back
  fetch             download a backup and decompress it to a snapshot file
  verify            compare a restored backup with the live cluster
  restore prepare   ready a member's data directory for etcdutl snapshot restore
  restore install   move the restored data into place
  artifact delete   delete what a backup wrote
  check             confirm a rolled cluster: healthy, one version, equal stores
  recover           wait until an etcd --force-new-cluster is a cluster of one
  replay            replay an archive onto a restored base backup, to a revision or a time
  prune             delete the archive's segments that only an older base backup would need

The continuous archive (one pod per archived cluster):
  archive           write every revision of a cluster to its archive, in segments

Before a member's etcd starts (its pod's init container):
  join-check        refuse to start a member that lost its data under its old ID

Run "tend COMMAND -h" for a command's flags.
`)
}

func runManager(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("tend manager", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := manager.DefaultOptions()
	opts.BindFlags(fs)
	podsetOpts := podset.DefaultOptions()
	podsetOpts.BindFlags(fs)
	queueOpts := queue.DefaultOptions()
	queueOpts.BindFlags(fs)
	etcdOpts := etcdcluster.DefaultOptions()
	etcdOpts.BindFlags(fs)
	backupOpts := etcdbackup.DefaultOptions()
	backupOpts.BindFlags(fs)
	agentImage := fs.String("agent-image", "",
		"The image whose tend agents run backup and restore Jobs. Empty: the manager's own, read from its pod (POD_NAME and POD_NAMESPACE), else "+podspec.DefaultAgentImage+".")
	// Every controller the manager can run, for --controllers.
	controllers := append([]manager.Controller{
		podset.Controller(&podsetOpts),
		queue.Controller(&queueOpts),
		etcdcluster.Controller(&etcdOpts),
	}, etcdbackup.Controllers(&backupOpts)...)
	config.RegisterFlags(fs) // --kubeconfig
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	selected, err := manager.SelectControllers(controllers, opts.Controllers)
	if err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts.Zap)))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("finding the apiserver: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	image, err := resolveAgentImage(ctx, cfg, *agentImage)
	if err != nil {
		return err
	}
	etcdOpts.AgentImage, backupOpts.AgentImage = image, image
	return manager.Run(ctx, cfg, opts, selected)
}

// resolveAgentImage is the agents' image: the flag's, else the manager's
// own (its pod's container "manager"), else the default.
func resolveAgentImage(ctx context.Context, cfg *rest.Config, flagged string) (string, error) {
	if flagged != "" {
		return flagged, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	own, err := manager.OwnImage(ctx, cfg, "manager")
	if err != nil {
		return "", fmt.Errorf("finding the agents' image (set --agent-image to skip this): %w", err)
	}
	return cmp.Or(own, podspec.DefaultAgentImage), nil
}
