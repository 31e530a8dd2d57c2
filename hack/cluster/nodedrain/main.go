// Command nodedrain stops and removes every pod sandbox of a CRI runtime, as
// kubelet would on a graceful node shutdown. Stopping a sandbox is what runs
// the CNI DEL that releases the pod's IP lease, removes its veth and its
// hostPort rules, so the local cluster runs it (with kubelet stopped) before
// it stops containerd. The pods stay in the API: the next kubelet start
// recreates their sandboxes, as after a node reboot.
//
//	nodedrain -endpoint unix:///run/tend-cluster/containerd/containerd.sock
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	endpoint := flag.String("endpoint", "", "The CRI endpoint, unix:///path/to/socket.")
	timeout := flag.Duration("timeout", 2*time.Minute, "Time limit of the whole drain.")
	flag.Parse()
	if *endpoint == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	n, err := drain(ctx, *endpoint)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodedrain: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("nodedrain: removed %d pod sandboxes\n", n)
}

// drain stops and removes every sandbox and returns how many it removed. It
// goes on past a sandbox that fails, and returns all the failures together.
func drain(ctx context.Context, endpoint string) (int, error) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, fmt.Errorf("connecting to %s: %w", endpoint, err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return 0, fmt.Errorf("listing pod sandboxes at %s: %w", endpoint, err)
	}
	var errs []error
	removed := 0
	for _, sb := range list.Items {
		name := sb.Id
		if m := sb.Metadata; m != nil {
			name = m.Namespace + "/" + m.Name + " (" + sb.Id[:min(12, len(sb.Id))] + ")"
		}
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stopping pod sandbox %s: %w", name, err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("removing pod sandbox %s: %w", name, err))
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}
