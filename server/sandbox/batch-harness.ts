/**
 * The batch harness: a small fixed Python program that runs ONE model-written program on many
 * standard inputs inside ONE sandbox process, so a coder's four hidden tests cost one bubblewrap
 * start instead of four (each start is most of a 70-100 ms run).
 *
 * It is bound read-only into the sandbox next to the program (`--ro-bind-data`, like the source)
 * and started by the same interpreter under the same prlimit limits, in place of the program.
 * Per case it forks; the child becomes what `python3 -I /tmp/main.py` would be (fresh `__main__`
 * module, fresh std streams on fds 0/1/2 made as the interpreter makes them, every other fd
 * closed, its own process group), compiles and runs the source, and exits as the interpreter
 * would (SystemExit codes, tracebacks without the harness's frame, atexit, 120 on a failed flush,
 * SIGINT for KeyboardInterrupt). The parent feeds the case's stdin through a pipe, counts stdout
 * + stderr against the per-case output cap in arrival order (cutting at the crossing byte and
 * killing the group, as `program-process.ts` does for one process), kills the group at the
 * per-case wall-clock limit, and when the case is over kills whatever it left behind (in
 * bubblewrap: every other process of the sandbox's pid namespace, by kill(-1)) and empties the
 * working folder, so the next case starts as a fresh run would. RLIMIT_CPU and RLIMIT_AS are per
 * process, so each forked case has the whole CPU and memory limit, as a separate run would.
 *
 * Protocol: argv `harness main_path wall_ms output_bytes contained(0|1)`; stdin a JSON array of
 * base64 stdins; stdout one JSON line per case, in order: {"exit", "signal" (number), "ended"
 * (null | "timeout" | "output-limit"), "out", "err" (base64 of the kept bytes), "truncated",
 * "ms"}. The child never holds the harness's stdout (fd 1 is replaced, fds >= 3 closed), and the
 * harness is made non-dumpable, so a program cannot open /proc/<harness>/fd or ptrace it to
 * forge another case's verdict; what it can do (kill the harness, stop it) ends the batch in
 * errors or timeouts, never in a pass.
 *
 * Kept as a string (not a .py file) so the esbuild bundle of the server carries it.
 */
export const BATCH_HARNESS_SOURCE = String.raw`
import base64, builtins, io, json, os, select, signal, sys, time, types

def _nondumpable():
    # PR_SET_DUMPABLE 0: /proc/<pid>/fd, /proc/<pid>/mem and ptrace are closed to processes
    # without CAP_SYS_PTRACE, which nothing in the sandbox has. Best effort outside Linux.
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except Exception:
        pass

def _stream(fd, mode, like):
    raw = io.FileIO(fd, mode, closefd=False)
    buf = io.BufferedReader(raw) if mode == 'rb' else io.BufferedWriter(raw)
    return io.TextIOWrapper(buf, encoding=like.encoding, errors=like.errors, line_buffering=like.line_buffering)

def _print_exception(e, tb):
    # Imported only when a case fails: the fewer pages the harness holds, the cheaper each fork.
    import traceback
    traceback.print_exception(type(e), e, tb)

def _exit_code(e):
    c = e.code
    if c is None:
        return 0
    if isinstance(c, int):
        return c
    try:
        print(c, file=sys.stderr)
    except Exception:
        pass
    return 1

def _child(source, main_path, like):
    sys.stdin = sys.__stdin__ = _stream(0, 'rb', like[0])
    sys.stdout = sys.__stdout__ = _stream(1, 'wb', like[1])
    sys.stderr = sys.__stderr__ = _stream(2, 'wb', like[2])
    mod = types.ModuleType('__main__')
    mod.__file__ = main_path
    mod.__cached__ = None
    mod.__builtins__ = builtins
    sys.modules['__main__'] = mod
    sys.argv = [main_path]
    code = 0
    interrupted = False
    try:
        try:
            compiled = compile(source, main_path, 'exec')
        except SyntaxError as e:
            _print_exception(e, None)
            code = 1
        else:
            exec(compiled, mod.__dict__)
    except SystemExit as e:
        code = _exit_code(e)
    except KeyboardInterrupt as e:
        _print_exception(e, e.__traceback__.tb_next)
        interrupted = True
    except BaseException as e:
        _print_exception(e, e.__traceback__.tb_next)
        code = 1
    try:
        if 'threading' in sys.modules:
            sys.modules['threading']._shutdown()
        import atexit
        atexit._run_exitfuncs()
    except SystemExit as e:
        code = _exit_code(e)
    except BaseException:
        pass
    try:
        sys.stdout.flush()
    except BaseException:
        code = 120
    try:
        sys.stderr.flush()
    except BaseException:
        pass
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)

def _killpg(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass

def _wipe(work, keep):
    # Iterative (a program may nest folders deeper than the recursion limit); folders are opened
    # up first (a program may have taken their permissions away).
    stack = [(os.path.join(work, n), False) for n in os.listdir(work) if os.path.join(work, n) not in keep]
    while stack:
        p, listed = stack.pop()
        try:
            if os.path.isdir(p) and not os.path.islink(p):
                if listed:
                    os.rmdir(p)
                    continue
                os.chmod(p, 0o700)
                stack.append((p, True))
                stack.extend((os.path.join(p, n), False) for n in os.listdir(p))
            else:
                os.unlink(p)
        except OSError:
            pass

GRACE = 1.0  # seconds the pipes may stay open after the program exits (a straggler), as program-process.ts

def _fork():
    # RLIMIT_NPROC counts the processes of this sandbox's user namespace (the host user's, when
    # unsandboxed), and a killed case's processes are released a moment after the kill: a fork
    # refused with EAGAIN is retried for a while (not counted in the case's wall clock) before the
    # batch gives up.
    delay = 0.005
    deadline = time.monotonic() + FORK_RETRY
    while True:
        try:
            return os.fork()
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

FORK_RETRY = 2.0  # seconds a refused fork is retried

def _case(source, main_path, work, data, wall, cap, like):
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = _fork()
    t0 = time.monotonic()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            os.dup2(in_r, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.closerange(3, os.sysconf('SC_OPEN_MAX'))
            os.chdir(work)
            _child(source, main_path, like)
        finally:
            os._exit(70)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    os.set_blocking(in_w, False)
    kept = {out_r: [], err_r: []}
    room = cap
    truncated = False
    ended = None
    exited = False
    deadline = t0 + wall
    grace_end = None
    pending = memoryview(data)
    open_fds = {out_r, err_r}
    poller = select.poll()
    for fd in (out_r, err_r):
        poller.register(fd, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    if len(pending) > 0:
        poller.register(in_w, select.POLLOUT)
    else:
        os.close(in_w)
        in_w = -1
    while open_fds or not exited:
        now = time.monotonic()
        limit = grace_end if exited else deadline
        if now >= limit:
            if exited:
                break
            if ended is None:
                ended = 'timeout'
            _killpg(pid)
            # The kill reaches the group at once; wait for the exit, then the grace for the pipes.
            deadline = now + 3600
        wait_ms = max(0, int((min(limit, deadline) - now) * 1000)) + 1
        for fd, ev in poller.poll(wait_ms):
            if fd == pidfd:
                poller.unregister(pidfd)
                exited = True
                _killpg(pid)
                grace_end = time.monotonic() + GRACE
            elif fd == in_w:
                try:
                    n = os.write(in_w, pending[:65536])
                    pending = pending[n:]
                except BlockingIOError:
                    continue
                except OSError:
                    pending = pending[:0]
                if len(pending) == 0:
                    poller.unregister(in_w)
                    os.close(in_w)
                    in_w = -1
            else:
                chunk = os.read(fd, 65536)
                if not chunk:
                    poller.unregister(fd)
                    open_fds.discard(fd)
                    continue
                if truncated:
                    continue
                if len(chunk) > room:
                    kept[fd].append(chunk[:room])
                    room = 0
                    truncated = True
                    if ended is None:
                        ended = 'output-limit'
                    _killpg(pid)
                    continue
                kept[fd].append(chunk)
                room -= len(chunk)
    ms = (time.monotonic() - t0) * 1000
    _killpg(pid)
    _, status = os.waitpid(pid, 0)
    for fd in list(open_fds) + ([in_w] if in_w >= 0 else []) + [pidfd]:
        os.close(fd)
    exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    return {
        'exit': exit_code, 'signal': sig, 'ended': ended, 'truncated': truncated, 'ms': ms,
        'out': base64.b64encode(b''.join(kept[out_r])).decode('ascii'),
        'err': base64.b64encode(b''.join(kept[err_r])).decode('ascii'),
    }

def main():
    main_path = sys.argv[1]
    wall = int(sys.argv[2]) / 1000
    cap = int(sys.argv[3])
    contained = sys.argv[4] == '1'
    _nondumpable()
    work = os.path.dirname(main_path)
    keep = {main_path, os.path.abspath(sys.argv[0])}
    with open(main_path, 'rb') as f:
        source = f.read()
    stdins = [base64.b64decode(s) for s in json.loads(sys.stdin.buffer.read())]
    like = (sys.stdin, sys.stdout, sys.stderr)
    # Everything the harness made so far is left alone by the cases' garbage collector, so forked
    # cases copy fewer pages on write.
    import gc
    gc.freeze()
    for data in stdins:
        result = _case(source, main_path, work, data, wall, cap, like)
        if contained and os.getpid() < 10:
            # In the sandbox's own pid namespace (where this is pid 2): every process but this one
            # and bwrap's init. Never on the host: kill(-1) there would reach the user's processes.
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        _wipe(work, keep)
        line = (json.dumps(result) + '\n').encode('ascii')
        while line:
            line = line[os.write(1, line):]

main()
`;
