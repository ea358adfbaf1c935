package kubectl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/qinglong/ql3/internal/sysfile"
	"github.com/qinglong/ql3/refuse"
)

const (
	// CodeExecFailed: kubectl could not be started (no Result), or its exit could not be observed.
	CodeExecFailed refuse.Code = "KUBECTL_EXEC_FAILED"
	// CodeTimeout: the run outlived Runner.Timeout or the caller's deadline; ql3 killed it.
	CodeTimeout refuse.Code = "KUBECTL_TIMEOUT"
	// CodeCanceled: the caller's context was canceled during the run; ql3 killed it.
	CodeCanceled refuse.Code = "KUBECTL_CANCELED"
	// CodeOutputLimit: stdout or stderr exceeded Runner.MaxOutput; ql3 killed the run.
	CodeOutputLimit refuse.Code = "KUBECTL_OUTPUT_LIMIT"
	// CodeKilled: a signal that ql3 did not send ended kubectl (crash, OOM kill, outside kill).
	CodeKilled refuse.Code = "KUBECTL_KILLED"
)

// drainGrace bounds how long output is still read after the process group was killed. Only a
// process that escaped the group (a new session) can hold the pipes open that long.
var drainGrace = 2 * time.Second

// stream is one of kubectl's output pipes, read to EOF or to the ceiling.
type stream struct {
	r        *os.File
	buf      []byte
	overflow bool
}

// drain reads s.r until EOF (or until the read end is closed under it), keeping at most max
// bytes. One byte more than max is an overflow: reading stops there, so a flooding child blocks
// on a full pipe until it is killed instead of being read without bound.
func (s *stream) drain(max int, overflow func()) {
	chunk := make([]byte, 64<<10)
	for {
		n, err := s.r.Read(chunk)
		if n > 0 {
			if room := max - len(s.buf); n > room {
				s.buf = append(s.buf, chunk[:room]...)
				s.overflow = true
				overflow()
				return
			}
			s.buf = append(s.buf, chunk[:n]...)
		}
		if err != nil {
			return
		}
	}
}

// aboveFD returns f, or a duplicate of it numbered above held (closing f). In the forked child the
// Go runtime dup3s its exec status pipe (and any stdio descriptor below 3) to the first number
// above the child's highest descriptor; were that number the held kubectl descriptor, execve of
// /proc/self/fd/<held> would find a pipe there and fail. With every child descriptor above held,
// no such dup can land on it.
func aboveFD(f *os.File, held int) (*os.File, error) {
	if int(f.Fd()) > held {
		return f, nil
	}
	nfd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, held+1)
	if err != nil {
		return nil, err
	}
	g := os.NewFile(uintptr(nfd), f.Name())
	_ = f.Close()
	return g, nil
}

// waitExited blocks until pid has exited without reaping it: the zombie keeps the pid, and so the
// process group id, from being reused while the group is still signalled.
func waitExited(pid int) error {
	for {
		err := unix.Waitid(unix.P_PID, pid, nil, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// pidfdOpen is unix.PidfdOpen; the tests replace it to take waitExited's path.
var pidfdOpen = unix.PidfdOpen

// waitExit waits as waitExited does, but parked in the runtime's poller on a pidfd of pid
// (readable once pid has exited) rather than blocked in waitid(2). A thread blocked in a system
// call for more than 10 ms makes the runtime's monitor thread take its P and then poll every
// 20 µs for a while; on a VM where each of its sleeps costs tens of µs that was about 1 ms of
// ql3's CPU per kubectl run. Where pidfds cannot be opened or polled (a kernel before 5.3, a
// seccomp filter) it is waitExited. pid must not have been reaped.
func waitExit(pid int) error {
	fd, err := pidfdOpen(pid, 0)
	if err != nil {
		return waitExited(pid)
	}
	// os.NewFile hands a non-blocking descriptor to the poller; pidfd_open's is close-on-exec.
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return waitExited(pid)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	if rc, err := f.SyscallConn(); err == nil {
		var werr error
		err = rc.Read(func(uintptr) bool {
			var info unix.Siginfo
			// The poller is edge-triggered: a look that failed with EINTR is retried here, since
			// no second edge would come for a pid that had already exited.
			_, werr = sysfile.RetryEINTR(func() (int, error) {
				return 0, unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
			})
			// With WNOHANG and nothing to report, waitid succeeds and zeroes si_signo.
			return werr != nil || info.Signo != 0
		})
		if err == nil {
			return werr
		}
	}
	// The poller would not wait on the descriptor: wait as before.
	return waitExited(pid)
}

// supervise starts kubectl, feeds stdin, drains both outputs concurrently, enforces the timeout,
// the context and the output ceiling by killing the whole process group, and reaps the process.
func (r *Runner) supervise(ctx context.Context, res *Result, dir string, stdin []byte) (*Result, error) {
	var files []*os.File // every pipe end we hold; all closed before returning
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	pipe := func() (*os.File, *os.File, error) {
		pr, pw, err := os.Pipe()
		if err == nil {
			files = append(files, pr, pw)
		}
		return pr, pw, err
	}
	inR, inW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, refuse.Wrap(CodeExecFailed, err, "step %s: create pipes", res.Step)
	}
	held, _ := strconv.Atoi(strings.TrimPrefix(res.Argv[0], "/proc/self/fd/"))
	for _, f := range []**os.File{&inR, &outW, &errW} {
		g, err := aboveFD(*f, held)
		if err != nil {
			return nil, refuse.Wrap(CodeExecFailed, err, "step %s: move pipe above descriptor %d", res.Step, held)
		}
		files = append(files, g)
		*f = g
	}
	attr := &os.ProcAttr{
		Dir:   dir,
		Env:   res.Env,
		Files: []*os.File{inR, outW, errW},
		// Its own process group, so that a kill reaches everything kubectl started; and killed
		// with us, so that no kubectl outlives a ql3 that died.
		Sys: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	deadline := time.NewTimer(r.Timeout)
	defer deadline.Stop()
	res.StartedAt = time.Now()
	// argv[0] is the held descriptor: os.StartProcess execs exactly that name, with no PATH lookup.
	p, err := os.StartProcess(res.Argv[0], res.Argv, attr)
	// The child has its own copies; ours would keep the pipes open and hide EOF.
	_, _, _ = inR.Close(), outW.Close(), errW.Close()
	if err != nil {
		return nil, refuse.Wrap(CodeExecFailed, err, "step %s: start kubectl", res.Step)
	}
	pid := p.Pid

	stdinDone := make(chan struct{})
	go func() {
		defer close(stdinDone)
		// A child that exits without reading stdin makes this fail with EPIPE; that is its answer
		// to judge, not ours, and the write must not block the run.
		if len(stdin) > 0 {
			_, _ = inW.Write(stdin)
		}
		_ = inW.Close()
	}()
	overflow := make(chan struct{})
	var once sync.Once
	onOverflow := func() { once.Do(func() { close(overflow) }) }
	out, errs := &stream{r: outR}, &stream{r: errR}
	var wg sync.WaitGroup
	for _, s := range []*stream{out, errs} {
		wg.Go(func() { s.drain(r.MaxOutput, onOverflow) })
	}
	streamsDone := make(chan struct{})
	go func() { wg.Wait(); close(streamsDone) }()
	exited := make(chan error, 1)
	go func() { exited <- waitExit(pid) }()

	var (
		reason   refuse.Code // why we killed the group; "" when we did not
		waitErr  error
		grace    <-chan time.Time
		done     = ctx.Done()
		isExited bool
		isDrain  bool
	)
	stop := func(code refuse.Code) {
		if reason == "" {
			reason = code
		}
		// The leader is not reaped yet, so -pid still names our group and nobody else's.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		deadline.Stop()
		done = nil
		if grace == nil {
			grace = time.After(drainGrace)
		}
	}
	for !isExited || !isDrain {
		select {
		case waitErr = <-exited:
			isExited, exited = true, nil
			if waitErr != nil {
				stop(CodeExecFailed)
			}
			// Whatever kubectl left behind in its group goes with it.
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		case <-streamsDone:
			isDrain, streamsDone = true, nil
		case <-overflow:
			overflow = nil
			stop(CodeOutputLimit)
		case <-deadline.C:
			stop(CodeTimeout)
		case <-done:
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				stop(CodeTimeout)
			} else {
				stop(CodeCanceled)
			}
		case <-grace:
			grace = nil
			// Closing the read ends ends the drains; the bytes read so far are kept.
			_, _ = outR.Close(), errR.Close()
		}
	}
	if reason == "" && (out.overflow || errs.overflow) {
		// The child wrote past the ceiling into the pipe buffer and exited before we saw it.
		reason = CodeOutputLimit
	}
	state, perr := p.Wait()
	res.FinishedAt = time.Now()
	_ = inW.Close() // unblocks the stdin writer should an escaped process hold the read end
	<-stdinDone
	res.Stdout, res.Stderr = out.buf, errs.buf
	if res.Stdout == nil {
		res.Stdout = []byte{}
	}
	if res.Stderr == nil {
		res.Stderr = []byte{}
	}
	var ws syscall.WaitStatus
	if perr == nil {
		ws, _ = state.Sys().(syscall.WaitStatus)
		if ws.Exited() {
			res.ExitCode = ws.ExitStatus()
		}
	}
	sizes := fmt.Sprintf("%d bytes of stdout, %d of stderr", len(res.Stdout), len(res.Stderr))
	switch {
	case reason == CodeExecFailed:
		return res, refuse.Wrap(CodeExecFailed, waitErr, "step %s: wait for kubectl", res.Step)
	case reason == CodeTimeout:
		return res, refuse.New(CodeTimeout, "step %s: kubectl did not finish within %s or the caller's deadline (%s); its process group was killed",
			res.Step, r.Timeout, sizes).
			WithHint("the step may have taken effect on the cluster; audit live state before retrying")
	case reason == CodeCanceled:
		return res, refuse.New(CodeCanceled, "step %s: canceled by the caller (%s); kubectl's process group was killed", res.Step, sizes)
	case reason == CodeOutputLimit:
		return res, refuse.New(CodeOutputLimit, "step %s: kubectl wrote more than %d bytes to %s; its process group was killed",
			res.Step, r.MaxOutput, overflowName(out, errs))
	case perr != nil:
		return res, refuse.Wrap(CodeExecFailed, perr, "step %s: reap kubectl", res.Step)
	case ws.Signaled():
		return res, refuse.New(CodeKilled, "step %s: kubectl was ended by signal %s that ql3 did not send (%s)",
			res.Step, ws.Signal(), sizes).
			WithHint("a crash mid-step: for apply the mutation may have happened with its response lost; rerun to recover")
	}
	return res, nil
}

func overflowName(out, errs *stream) string {
	switch {
	case out.overflow && errs.overflow:
		return "stdout and stderr"
	case errs.overflow:
		return "stderr"
	}
	return "stdout"
}
