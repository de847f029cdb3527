/**
 * The command lines that run one Python program: inside bubblewrap, or (mode `unsandboxed`) on
 * the host. Pure: paths and limits in, argv out, so the containment flags can be read in one
 * place and tested without spawning anything.
 */
import { lstatSync, readlinkSync } from 'node:fs';
import type { SandboxLimits } from '../protocol/experiment-config.ts';
import type { ProcessSpec } from './program-process.ts';

/** Absolute paths only: the sandbox has no PATH lookup of ours, and a pyenv shim must never be picked up. */
export const BWRAP = '/usr/bin/bwrap';
export const PRLIMIT = '/usr/bin/prlimit';
/** Debian's interpreter; its standard library lives under /usr, which the sandbox binds read-only. */
export const PYTHON = '/usr/bin/python3';

/** Where the program's source is inside the sandbox (its private tmpfs, which is also the working folder). */
export const SANDBOX_WORK = '/tmp';
export const SANDBOX_MAIN = '/tmp/main.py';

/** The descriptor (in the spawned bwrap) from which `--ro-bind-data` reads the program's source. */
export const SOURCE_FD = 3;

/** Where the batch harness (`batch-harness.ts`) is inside the sandbox, next to the program, and the descriptor it is read from. */
export const SANDBOX_HARNESS = '/tmp/troupe-harness.py';
export const HARNESS_FD = 4;

/** nobody/nogroup: root's processes are exempt from RLIMIT_NPROC, so a root server runs programs as this user. */
export const UNPRIVILEGED_ID = 65534;

/** The whole environment a program sees; nothing of the server's (tokens, paths, HOME) leaks in. */
export function programEnv(home: string): Record<string, string> {
  return { PATH: '/usr/bin:/bin', HOME: home, LANG: 'C.UTF-8', PYTHONDONTWRITEBYTECODE: '1' };
}

/**
 * prlimit in front of the interpreter: soft = hard for every limit, so the program cannot raise
 * them back. RLIMIT_CPU at the hard limit is SIGKILL (the kernel sends SIGXCPU only between a
 * lower soft limit and the hard one). Core dumps are off: a crash must not write a file.
 */
export function prlimitArgs(limits: SandboxLimits): [string, ...string[]] {
  return [
    PRLIMIT,
    `--cpu=${limits.cpuSeconds}`,
    `--as=${limits.memoryMb * 1024 * 1024}`,
    `--nproc=${limits.processes}`,
    `--fsize=${limits.fileBytes}`,
    `--nofile=${limits.openFiles}`,
    '--core=0',
  ];
}

/**
 * How a top-level system folder enters the sandbox. On merged-/usr systems (Debian 12) /bin,
 * /lib and /lib64 are symlinks into /usr: binding them would bind their targets a second time,
 * so they become the same symlinks inside. A folder that is really there is bound read-only, and
 * one that is missing (/lib32 on most machines) is left out.
 */
function systemFolder(path: string): string[] {
  try {
    const st = lstatSync(path);
    if (st.isSymbolicLink()) return ['--symlink', readlinkSync(path), path];
    if (st.isDirectory()) return ['--ro-bind', path, path];
  } catch {
    // Missing: nothing to bind.
  }
  return [];
}

/**
 * bwrap's arguments, up to and including the program: every namespace unshared (so no network
 * but an unconfigured loopback, no view of other processes, no IPC, its own hostname and user
 * namespace), the system read-only, a private tmpfs as the only writable folder, and nothing of
 * the workspace, home folder, /root, /work or `.troupe/`. The source arrives through a pipe on
 * `SOURCE_FD` (`--ro-bind-data`), so it is never a command-line argument and stdin stays the
 * program's own.
 */
export function bubblewrapArgs(limits: SandboxLimits): string[] {
  return containedArgs(limits, [], [SANDBOX_MAIN]);
}

/**
 * The same sandbox for a batch (`batch.ts`): the harness bound read-only next to the program, and
 * run in its place with `harnessArgs`. Every containment flag is `bubblewrapArgs`' own.
 */
export function bubblewrapBatchArgs(limits: SandboxLimits, harnessArgs: readonly string[]): string[] {
  return containedArgs(limits, ['--ro-bind-data', String(HARNESS_FD), SANDBOX_HARNESS], [SANDBOX_HARNESS, ...harnessArgs]);
}

function containedArgs(limits: SandboxLimits, binds: readonly string[], script: readonly string[]): string[] {
  const env = programEnv(SANDBOX_WORK);
  return [
    '--unshare-all',
    '--die-with-parent',
    // A new session: the program cannot reach the server's terminal (TIOCSTI) or its process group.
    '--new-session',
    '--clearenv',
    ...Object.entries(env).flatMap(([k, v]) => ['--setenv', k, v]),
    '--ro-bind', '/usr', '/usr',
    ...['/bin', '/lib', '/lib64', '/lib32', '/libx32'].flatMap(systemFolder),
    '--proc', '/proc',
    '--dev', '/dev',
    '--tmpfs', SANDBOX_WORK,
    '--ro-bind-data', String(SOURCE_FD), SANDBOX_MAIN,
    ...binds,
    '--chdir', SANDBOX_WORK,
    // bwrap's root is a tmpfs of its own; read-only, so /tmp is the one place a program can write.
    '--remount-ro', '/',
    '--',
    ...prlimitArgs(limits),
    // -I: no PYTHON* variables, no user site-packages, no script folder on sys.path.
    PYTHON, '-I', ...script,
  ];
}

/** The host command for mode `unsandboxed`: the same limits, the program in `workDir`. */
export function unsandboxedArgs(limits: SandboxLimits, mainPath: string): [string, ...string[]] {
  return [...prlimitArgs(limits), PYTHON, '-I', mainPath];
}

/**
 * Who runs the program. A root server hands it to nobody: the kernel does not enforce
 * RLIMIT_NPROC for root, so only an unprivileged user makes the process limit real. Any other
 * user runs it as themselves (inside bubblewrap's user namespace, RLIMIT_NPROC counts only the
 * processes of that namespace on Linux ≥ 5.14, not the user's other processes on the host).
 */
export function programIds(): { uid: number; gid: number } | undefined {
  return process.getuid?.() === 0 ? { uid: UNPRIVILEGED_ID, gid: UNPRIVILEGED_ID } : undefined;
}

/** Everything `startProcess` needs to run `code` in bubblewrap. */
export function bubblewrapSpec(limits: SandboxLimits, code: Buffer, stdin: Buffer): ProcessSpec {
  const ids = programIds();
  return {
    argv: [BWRAP, ...bubblewrapArgs(limits)],
    env: programEnv(SANDBOX_WORK),
    // bwrap may run as nobody, who cannot enter the server's working folder (/root, say).
    cwd: '/',
    ...(ids ? { ids } : {}),
    stdin,
    files: [code],
    wallMs: limits.wallMs,
    outputBytes: limits.outputBytes,
    exitCodeCarriesSignal: true,
  };
}
