/**
 * Can model-written code run sandboxed on this machine? Answered by running a trivial program
 * through the whole sandbox (bwrap, prlimit, python, the uid switch), because each piece can be
 * present and the whole still fail: user namespaces off by sysctl, AppArmor's restriction on
 * unprivileged namespaces, a container's seccomp profile. A failure names the missing piece and
 * what to do about it. Used by `Sandbox.open` and `troupe doctor`.
 */
import { execFile } from 'node:child_process';
import { access, constants, readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { sandboxLimitsSchema, type SandboxLimits } from '../protocol/experiment-config.ts';
import { startProcess } from './program-process.ts';
import { BWRAP, PRLIMIT, PYTHON, bubblewrapSpec } from './sandbox-command.ts';

export interface SandboxProbe {
  readonly available: boolean;
  /** What works, or what failed and why. */
  readonly detail: string;
  /** What to run or change so that it works; absent when it does. */
  readonly remedy?: string;
  /** `bwrap --version`'s number, when bwrap runs at all. */
  readonly bubblewrapVersion?: string;
}

const run = promisify(execFile);

async function executable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

async function readSysctl(path: string): Promise<string | null> {
  try {
    return (await readFile(path, 'utf8')).trim();
  } catch {
    return null;
  }
}

/** Which switch turns unprivileged user namespaces off here, read from /proc/sys. */
async function userNamespaceRemedy(): Promise<string> {
  if ((await readSysctl('/proc/sys/kernel/unprivileged_userns_clone')) === '0') return 'sysctl -w kernel.unprivileged_userns_clone=1';
  if ((await readSysctl('/proc/sys/user/max_user_namespaces')) === '0') return 'sysctl -w user.max_user_namespaces=15000';
  if ((await readSysctl('/proc/sys/kernel/apparmor_restrict_unprivileged_userns')) === '1') return 'sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (or an AppArmor profile that allows userns for /usr/bin/bwrap)';
  return 'allow unprivileged user namespaces (sysctl user.max_user_namespaces > 0; in a container, a seccomp profile that permits unshare/clone with CLONE_NEWUSER)';
}

/** Probes with `limits` (the defaults when absent), exactly as a run would. */
export async function probeSandbox(limits: SandboxLimits = sandboxLimitsSchema.parse({})): Promise<SandboxProbe> {
  if (!(await executable(BWRAP))) return { available: false, detail: `bubblewrap is not installed (${BWRAP})`, remedy: 'apt-get install bubblewrap' };
  if (!(await executable(PRLIMIT))) return { available: false, detail: `prlimit is not installed (${PRLIMIT})`, remedy: 'apt-get install util-linux' };
  if (!(await executable(PYTHON))) return { available: false, detail: `Python is not installed (${PYTHON})`, remedy: 'apt-get install python3' };
  let bubblewrapVersion: string | undefined;
  try {
    const { stdout } = await run(BWRAP, ['--version'], { timeout: 5000 });
    bubblewrapVersion = /(\d+(?:\.\d+)+)/.exec(stdout)?.[1] ?? stdout.trim();
  } catch (e) {
    return { available: false, detail: `${BWRAP} --version failed: ${e instanceof Error ? e.message : String(e)}`, remedy: 'reinstall bubblewrap: apt-get install --reinstall bubblewrap' };
  }
  const version = { bubblewrapVersion };
  const code = 'print(2 + 3)\n';
  const outcome = await startProcess(bubblewrapSpec({ ...limits, wallMs: Math.max(limits.wallMs, 10_000) }, Buffer.from(code), Buffer.alloc(0))).done;
  if (outcome.status === 'ok' && outcome.stdout === '5\n') {
    return { available: true, detail: `bubblewrap ${bubblewrapVersion} runs ${PYTHON} with no network, a read-only system and a private /tmp`, ...version };
  }
  const said = outcome.stderr.trim().split('\n').slice(-3).join(' / ') || `status ${outcome.status}, exit ${outcome.exitCode ?? outcome.signal}`;
  if (/namespace|uid map|setting up uid|Operation not permitted|No permissions/i.test(outcome.stderr)) {
    return { available: false, detail: `user namespaces are disabled, so bubblewrap cannot start (${said})`, remedy: await userNamespaceRemedy(), ...version };
  }
  return { available: false, detail: `a trivial program failed inside bubblewrap: ${said}`, remedy: 'run `troupe doctor` and check that bwrap, prlimit and python3 work from /usr/bin', ...version };
}
