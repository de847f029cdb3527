/**
 * What the sandbox tests share: finding the programs this process started that are still running.
 * The machine may be running other sandboxes at the same time (a training run beside `npm test`),
 * so a program counts only when it, or a process it descends from, carries this process's
 * `SANDBOX_OWNER_VAR`: bwrap carries it and everything in its pid namespace descends from bwrap;
 * unsandboxed, the program carries it itself, so a child that escaped the group kill and was
 * reparented to init is still found.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { SANDBOX_OWNER_VAR } from './program-process.ts';
import { UNPRIVILEGED_ID } from './sandbox-command.ts';

/** A process running a program (the sandboxed /tmp/main.py, an unsandboxed temp folder's) or the batch harness. */
const PROGRAM = /\/tmp\/main\.py|troupe-harness\.py|troupe-unsandboxed-/;

/** The parent's pid from /proc/<pid>/stat: the command name may hold spaces and parentheses, so read after the last ')'. */
function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

/** Whether `pid`'s environment names `owner` as the process that ran its sandbox. */
function startedBy(pid: number, owner: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`${SANDBOX_OWNER_VAR}=${owner}`);
  } catch {
    return false; // Another user's process (init, as a non-root user), or gone.
  }
}

/** Whether `pid` or one of its ancestors (up to `owner` itself, whose environment never carries the mark) was started by `owner`'s sandbox. */
function ownedBy(pid: number, owner: number): boolean {
  for (let p = pid; p > 1 && p !== owner; p = parentOf(p)) if (startedBy(p, owner)) return true;
  return false;
}

/** Programs that a sandbox of process `owner` (by default this one) started and that are still running, as `pid: command line`. */
export function strays(owner = process.pid): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number)) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (PROGRAM.test(cmd) && ownedBy(pid, owner)) found.push(`${pid}: ${cmd}`);
    } catch {
      // Exited while we looked.
    }
  }
  return found;
}

/**
 * Zombies of user `uid`: killed programs that init has not reaped yet. `strays` cannot see them
 * (they have no command line or environment left), but RLIMIT_NPROC counts them, so while they
 * last an unsandboxed program (run as `UNPRIVILEGED_ID` when the tests run as root) may fail to fork.
 */
function zombiesOf(uid: number): number {
  let n = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      if (/^State:\s+Z/m.test(status) && new RegExp(`^Uid:\\s+${uid}\\s`, 'm').test(status)) n++;
    } catch {
      // Exited while we looked.
    }
  }
  return n;
}

/**
 * Kills take a moment to reach every process of a pid namespace; waits up to `ms` for none of ours
 * to be left (and for the unprivileged user's zombies to be reaped, which count against the next
 * program's process limit; not asserted, since other programs may leave some).
 */
export async function noStraysWithin(ms: number): Promise<void> {
  const end = performance.now() + ms;
  while ((strays().length > 0 || zombiesOf(UNPRIVILEGED_ID) > 0) && performance.now() < end) await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(strays(), []);
}
