/**
 * What the inspector shows of the programs a branch ran (a turn record's `executions`): per program
 * a status badge, its time, and its code, stdin, stdout and stderr in full. Pure: the view
 * (execution-view.ts) puts these strings into the DOM as text, never as markup, since the code is
 * model output and stdout/stderr are the program's.
 */
import type { Execution } from '../../../server/protocol/trajectory.ts';

/** How a badge is coloured: the program did what was asked, failed, or never ran. */
export type ExecutionTone = 'ok' | 'failed' | 'refused';

export interface ExecutionSection {
  readonly label: 'code' | 'stdin' | 'stdout' | 'stderr';
  /** The text exactly as stored; '' is shown as an empty marker. */
  readonly text: string;
}

export interface ExecutionRow {
  /** 1-based, in the order the act ran them. */
  readonly number: number;
  readonly language: string;
  /** `ok · exit 0`, `error · exit 1`, `timeout · SIGKILL`, `refused`. */
  readonly badge: string;
  readonly tone: ExecutionTone;
  /** `12 ms`, `1.25 s`. */
  readonly time: string;
  /** Set when the sandbox cut stdout or stderr at its output limit. */
  readonly cutNote?: string;
  /** code, stdin (only when the program was given some), stdout, stderr. */
  readonly sections: readonly ExecutionSection[];
}

export function executionRows(executions: readonly Execution[] | undefined): ExecutionRow[] {
  return (executions ?? []).map((e, i) => {
    const sections: ExecutionSection[] = [{ label: 'code', text: e.code }];
    if (e.stdin !== '') sections.push({ label: 'stdin', text: e.stdin });
    sections.push({ label: 'stdout', text: e.stdout }, { label: 'stderr', text: e.stderr });
    return {
      number: i + 1,
      language: e.language,
      badge: executionBadge(e),
      tone: e.status === 'ok' ? 'ok' : e.status === 'refused' ? 'refused' : 'failed',
      time: formatDuration(e.durationMs),
      ...(e.truncated ? { cutNote: 'output cut at the sandbox limit' } : {}),
      sections,
    };
  });
}

/** The status with how the process ended: its exit code, or the signal that stopped it. */
export function executionBadge(e: Pick<Execution, 'status' | 'exitCode' | 'signal'>): string {
  const parts: string[] = [e.status];
  if (e.exitCode !== null) parts.push(`exit ${e.exitCode}`);
  if (e.signal !== null) parts.push(e.signal);
  return parts.join(' · ');
}

/** The flag in a branch's row of the list: how many programs it ran and how many did not end `ok`. */
export function programsFlag(executions: readonly Execution[] | undefined): string | undefined {
  const n = executions?.length ?? 0;
  if (n === 0) return undefined;
  const failed = executions?.filter((e) => e.status !== 'ok').length ?? 0;
  return `${n} program${n === 1 ? '' : 's'}${failed > 0 ? ` · ${failed} not ok` : ''}`;
}

export function formatDuration(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}
