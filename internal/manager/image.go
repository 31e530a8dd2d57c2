package manager

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Environment variables through which the manager's Deployment tells it
// its own pod (the downward API).
const (
	EnvPodName      = "POD_NAME"
	EnvPodNamespace = "POD_NAMESPACE"
)

// OwnImage returns the image of container in the pod that runs this
// process, named by POD_NAME and POD_NAMESPACE, so that the Jobs the
// manager creates run its agents from the very image it runs, whatever
// overlay or tag deployed it. Outside a pod (neither variable set) it
// returns "" and no error.
func OwnImage(ctx context.Context, cfg *rest.Config, container string) (string, error) {
	name, ns := os.Getenv(EnvPodName), os.Getenv(EnvPodNamespace)
	if name == "" || ns == "" {
		return "", nil
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return "", fmt.Errorf("a client to read the manager's own pod: %w", err)
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		return "", fmt.Errorf("reading the manager's own pod %s/%s: %w", ns, name, err)
	}
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == container {
			return ctr.Image, nil
		}
	}
	return "", fmt.Errorf("the manager's own pod %s/%s has no container %q", ns, name, container)
}
