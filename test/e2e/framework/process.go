//go:build e2e

package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
)

// SignalContainer sends sig to every process of pod's running container
// named container, found on this machine (the cluster's one node) by the
// pod's UID and the container's ID in the processes' cgroups, and returns
// how many it signalled. SIGSTOP freezes a member without any of
// Kubernetes' knowing: its pod stays Running, its container is not
// restarted until a liveness probe says so; SIGCONT thaws it. The chaos
// suite (test/chaos) finds processes the same way.
func SignalContainer(pod *corev1.Pod, container string, sig syscall.Signal) (int, error) {
	var containerID string
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == container && st.State.Running != nil {
			_, containerID, _ = strings.Cut(st.ContainerID, "://")
		}
	}
	if containerID == "" {
		return 0, fmt.Errorf("pod %s/%s has no running container %s", pod.Namespace, pod.Name, container)
	}
	procs, err := filepath.Glob("/proc/[0-9]*/cgroup")
	if err != nil {
		return 0, err
	}
	uid := string(pod.UID)
	signalled := 0
	for _, f := range procs {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // the process has gone
		}
		s := string(data)
		inPod := strings.Contains(s, uid) || strings.Contains(s, strings.ReplaceAll(uid, "-", "_"))
		if !inPod || !strings.Contains(s, containerID) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if err != nil {
			continue
		}
		if err := syscall.Kill(pid, sig); err == nil {
			signalled++
		}
	}
	if signalled == 0 {
		return 0, fmt.Errorf("found no process of container %s (%s) of pod %s/%s on this machine to send %v", container, containerID, pod.Namespace, pod.Name, sig)
	}
	return signalled, nil
}
