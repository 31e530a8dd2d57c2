//go:build e2e

package framework

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
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
	pids, err := containerProcesses(pod, container)
	if err != nil {
		return 0, err
	}
	signalled := 0
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err == nil {
			signalled++
		}
	}
	if signalled == 0 {
		return 0, fmt.Errorf("no process of container %s of pod %s/%s took %v: all had gone", container, pod.Namespace, pod.Name, sig)
	}
	return signalled, nil
}

// PartitionPort cuts pod off on one TCP port: in the network namespace of
// pod's running container named container, every packet to that port, and
// every packet the pod sends to that port elsewhere, is dropped (iptables,
// run through nsenter). Nothing answers, nothing is refused: the peers see a
// partition. Other ports, the kubelet's probes among them, still work, so a
// process that only loses its peers is neither restarted nor told. The
// rules live as long as the pod's sandbox: a new pod of the same name has
// a network of its own.
func PartitionPort(pod *corev1.Pod, container string, port int32) error {
	pids, err := containerProcesses(pod, container)
	if err != nil {
		return err
	}
	netns := fmt.Sprintf("/proc/%d/ns/net", pids[0])
	p := strconv.Itoa(int(port))
	for _, chain := range []string{"INPUT", "OUTPUT"} {
		cmd := exec.Command("nsenter", "--net="+netns, "iptables", "-w", "-A", chain, "-p", "tcp", "--dport", p, "-j", "DROP")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("dropping TCP port %s (%s) in pod %s/%s: %w: %s", p, chain, pod.Namespace, pod.Name, err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// containerProcesses returns the processes of pod's running container named
// container on this machine, found by the pod's UID and the container's ID
// in their cgroups.
func containerProcesses(pod *corev1.Pod, container string) ([]int, error) {
	var containerID string
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == container && st.State.Running != nil {
			_, containerID, _ = strings.Cut(st.ContainerID, "://")
		}
	}
	if containerID == "" {
		return nil, fmt.Errorf("pod %s/%s has no running container %s", pod.Namespace, pod.Name, container)
	}
	procs, err := filepath.Glob("/proc/[0-9]*/cgroup")
	if err != nil {
		return nil, err
	}
	uid := string(pod.UID)
	var pids []int
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
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("found no process of container %s (%s) of pod %s/%s on this machine", container, containerID, pod.Namespace, pod.Name)
	}
	return pids, nil
}
