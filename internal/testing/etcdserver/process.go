package etcdserver

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"

	"github.com/tend-dev/tend/internal/testing/logtail"
)

// process is one running etcd.
type process struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// startProcess starts bin with args, its output going to log. The process
// gets a group of its own and SIGKILL when the thread that started it dies,
// so that a test binary that crashes or times out leaves no etcd behind.
func startProcess(bin string, args []string, log *logtail.Buffer) (*process, error) {
	p := &process{exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = processEnv()
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	started := make(chan error)
	go func() {
		// The parent-death signal follows the starting thread, not the
		// process: keep that thread alive until etcd is reaped. The thread
		// is never unlocked, so it ends with this goroutine.
		runtime.LockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	return p, nil
}

// processEnv is the test process's environment without the ETCD_ and
// ETCDCTL_ variables, which etcd would read as flags.
func processEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(strings.ToUpper(k), "ETCD") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// running tells whether the process has not exited yet.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// exitReason says how the process ended; call it once p.exited is closed.
func (p *process) exitReason() string {
	if p.waitErr == nil {
		return "exit status 0"
	}
	return p.waitErr.Error()
}

// kill sends SIGKILL to the process group and waits for the process.
func (p *process) kill() {
	if !p.running() {
		// Reaped: its id may belong to someone else now.
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}
