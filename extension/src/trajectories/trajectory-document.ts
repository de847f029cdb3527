/**
 * Renders a trajectory (TrajectoryDetail from `trajectory/get`) as a plain-text document for reading
 * and for `vscode.diff`, and says where each turn's block is so the editor can annotate it.
 *
 * Layout rules, all for the sake of a line diff of two trajectories of the same task (two of one
 * step, or one task at two steps):
 * - Every line that should pair up across trajectories is free of volatile numbers. The turn rule
 *   `── turn 2 · plan (policy plan) ──` names only the turn, agent and policy; branch index, group
 *   and rewards go on lines of their own, so a changed reward shows as one changed line instead of
 *   unpairing the block. Rewards per turn are drawn by an editor decoration after the `  reward`
 *   line under the rule, whose text has no number: a short line, so the annotation stays in view
 *   in a narrow editor (the inspector beside it, a side of a diff), where after the rule it was cut
 *   off at the right edge.
 * - The header block and each turn block have a fixed set of labelled lines whatever the values
 *   (a parse line is always present, "ok" or the error), so equal tasks give equal line structure.
 * - Prompt and response text is indented by four spaces, so no line of model output can look like a
 *   turn rule to a reader or to the TextMate grammar.
 * - The programs a turn ran (its `executions`) follow its response, one block each: a header
 *   `  ▸ python · ok · exit 0` (two spaces, like a label), the sections `code`, `stdin` (only when
 *   there was some), `stdout` and `stderr` at four spaces, and their text at six, so program
 *   output cannot imitate a header or a section either. Durations are not in the text (the same
 *   program takes a different time on every run, and would show as a changed line in every diff):
 *   an after-line decoration and the hover on the header show them. Long sections keep their first
 *   lines and say how many they left out, on a four-space line of their own. Control characters
 *   in program output are shown as their Unicode control pictures, so the document stays printable.
 *   A turn that ran no program renders exactly as before.
 *
 * Line numbers in the annotation map are 0-based, as `vscode.Position` counts them.
 */
import type { Execution, TrajectoryDetail, TurnRecord, TurnWithSiblings } from '../../../server/protocol/trajectory.ts';

/** One sample among the alternatives of a turn (its own branch, sibling branches, other rollouts). */
export interface BranchAnnotation {
  /** Trajectory the sample belongs to; differs from the document's for other rollouts (GRPO baseline). */
  readonly trajectoryId: number;
  /** Branch index within its (turn, agent) tree node. */
  readonly branch: number;
  /** Whether this is the sample the document's turn shows (the kept one of this trajectory). */
  readonly isThisTurn: boolean;
  readonly kept: boolean;
  readonly reward: number;
  readonly teamReward: number;
  readonly localReward: number;
  readonly advantage?: number;
  readonly parseError?: string;
  /** First non-blank line of the response, shortened. */
  readonly firstLine: string;
}

/** One program a turn ran, and the line of its `  ▸ python · …` header. */
export interface ExecutionAnnotation {
  /** Position in the turn's `executions`. */
  readonly index: number;
  /** Line of the block's header: the duration decoration and the hover attach here. */
  readonly headerLine: number;
  /** Last line of the block (inclusive). */
  readonly endLine: number;
  readonly status: Execution['status'];
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly truncated: boolean;
  readonly durationMs: number;
  /** Lines of code, stdout and stderr the document left out (0 when it shows them whole). */
  readonly omittedLines: { readonly code: number; readonly stdin: number; readonly stdout: number; readonly stderr: number };
}

/** The values annotated on one turn and where its block is. */
export interface TurnAnnotation {
  /** Position of the turn in `detail.turns`. */
  readonly index: number;
  /** Line of the `── turn …` rule: the hover and CodeLens attach here. */
  readonly headerLine: number;
  /** Line of the `  reward` label under the rule: the reward annotation is drawn after it (and the hover works there too). */
  readonly rewardLine: number;
  /** First and last line of the turn's block (inclusive). */
  readonly startLine: number;
  readonly endLine: number;
  readonly turn: number;
  readonly agentId: string;
  readonly policyId: string;
  readonly branch: number;
  readonly kept: boolean;
  /** Branches sampled at this (turn, agent) in this trajectory: K under tree sampling, 1 otherwise. */
  readonly k: number;
  readonly teamReward: number;
  readonly localReward: number;
  /** Combined reward `α·team + local` that ranked the branches. */
  readonly reward: number;
  readonly advantage?: number;
  readonly groupId?: string;
  /** Samples in the AT-GRPO group (this turn and its siblings); absent for an ungrouped turn. */
  readonly groupSize?: number;
  readonly parseError?: string;
  /** This turn and its siblings: this trajectory's branches by index, then other rollouts. */
  readonly branches: readonly BranchAnnotation[];
  /** The programs the turn's act ran, in order; empty when it ran none. */
  readonly executions: readonly ExecutionAnnotation[];
}

export interface RenderedTrajectory {
  readonly text: string;
  /** Lines of the trajectory header block (inclusive). */
  readonly header: { readonly startLine: number; readonly endLine: number };
  readonly turns: readonly TurnAnnotation[];
}

/** How much of a branch's first response line the compact list shows. */
const FIRST_LINE_WIDTH = 80;
const INDENT = '    ';
/** Program text (code, stdin, stdout, stderr) sits two columns deeper than the section labels. */
const PROGRAM_INDENT = '      ';
/**
 * Lines of a program section the document shows. Output the sandbox let through can still be
 * thousands of short lines; the document is for reading and diffing, and the inspector shows it whole.
 */
export const EXECUTION_SECTION_LINES = { code: 200, stdin: 40, stdout: 60, stderr: 60 } as const;
/** Characters of one program line the document shows; the rest is replaced by a count. */
export const EXECUTION_LINE_WIDTH = 400;

export function renderTrajectory(detail: TrajectoryDetail): RenderedTrajectory {
  const t = detail.trajectory;
  const lines: string[] = [];
  const field = (label: string, value: string) => lines.push(`  ${label.padEnd(9)} ${value}`);

  lines.push('Troupe trajectory');
  field('id', String(t.id));
  field('run', t.runId);
  field('step', String(t.step));
  field('phase', t.phase);
  field('env', `${t.envName} · seed ${t.envSeed}`);
  field('instance', `${t.envInstance} · rollout ${t.rollout}`);
  field('success', t.success ? 'yes' : 'no');
  field('team', formatSigned(t.teamReward));
  field('local', formatSigned(t.localReward));
  field('turns', String(t.turnCount));
  const header = { startLine: 0, endLine: lines.length - 1 };

  const turns: TurnAnnotation[] = [];
  detail.turns.forEach((turn, index) => {
    lines.push('');
    const startLine = lines.length;
    const branches = branchesOf(turn);
    const k = branches.filter((b) => b.trajectoryId === turn.trajectoryId).length;
    const groupSize = turn.groupId === undefined ? undefined : turn.siblings.length + 1;

    lines.push(turnRule(turn));
    const rewardLine = lines.length;
    lines.push('  reward');
    field('branch', `${turn.branch} of ${k}${turn.kept ? ' · kept' : ''}`);
    field('group', turn.groupId === undefined ? 'none (not trained on)' : `${turn.groupId} · ${plural(groupSize ?? 1, 'sample')}`);
    field('parse', turn.parseError === undefined ? 'ok' : `error: ${oneLine(turn.parseError)}`);
    lines.push('  prompt');
    lines.push(...indentText(turn.promptText));
    lines.push('  response');
    lines.push(...indentText(turn.responseText));
    const executions = (turn.executions ?? []).map((e, i) => executionBlock(e, i, lines));
    lines.push('  branches');
    lines.push(...branchLines(branches, turn.trajectoryId));

    turns.push({
      index,
      headerLine: startLine,
      rewardLine,
      startLine,
      endLine: lines.length - 1,
      turn: turn.turn,
      agentId: turn.agentId,
      policyId: turn.policyId,
      branch: turn.branch,
      kept: turn.kept,
      k,
      teamReward: turn.teamReward,
      localReward: turn.localReward,
      reward: turn.reward,
      ...(turn.advantage === undefined ? {} : { advantage: turn.advantage }),
      ...(turn.groupId === undefined ? {} : { groupId: turn.groupId }),
      ...(groupSize === undefined ? {} : { groupSize }),
      ...(turn.parseError === undefined ? {} : { parseError: turn.parseError }),
      branches,
      executions,
    });
  });
  if (detail.turns.length === 0) lines.push('', '  (no turns)');

  return { text: `${lines.join('\n')}\n`, header, turns };
}

/**
 * The rule that opens a turn's block; only stable identifiers. Kept short rather than padded to a
 * width: the reward annotation is drawn after it, and in a side-by-side diff a wide rule pushes the
 * annotation out of view.
 */
export function turnRule(turn: Pick<TurnRecord, 'turn' | 'agentId' | 'policyId'>): string {
  return `── turn ${turn.turn} · ${oneLine(turn.agentId)} (policy ${oneLine(turn.policyId)}) ──`;
}

/** Appends one program's block to `lines` and says where it is. */
function executionBlock(e: Execution, index: number, lines: string[]): ExecutionAnnotation {
  const headerLine = lines.length;
  lines.push(`  ${executionSummary(e)}`);
  const section = (label: keyof typeof EXECUTION_SECTION_LINES, text: string): number => {
    lines.push(`${INDENT}${label}`);
    const { shown, omitted } = programText(text, EXECUTION_SECTION_LINES[label]);
    lines.push(...shown);
    if (omitted > 0) lines.push(`${INDENT}… ${plural(omitted, 'more line')} of ${label} not shown`);
    return omitted;
  };
  const code = section('code', e.code);
  const stdin = e.stdin === '' ? 0 : section('stdin', e.stdin);
  const stdout = section('stdout', e.stdout);
  const stderr = section('stderr', e.stderr);
  return {
    index,
    headerLine,
    endLine: lines.length - 1,
    status: e.status,
    exitCode: e.exitCode,
    signal: e.signal,
    truncated: e.truncated,
    durationMs: e.durationMs,
    omittedLines: { code, stdin, stdout, stderr },
  };
}

/**
 * A program's header without the time: `▸ python · ok · exit 0`, `▸ python · timeout · signal
 * SIGKILL`, `▸ python · refused`; `· [cut]` when the sandbox cut its stdout or stderr.
 */
export function executionSummary(e: Pick<Execution, 'language' | 'status' | 'exitCode' | 'signal' | 'truncated'>): string {
  const parts = [`▸ ${e.language}`, e.status];
  if (e.exitCode !== null) parts.push(`exit ${e.exitCode}`);
  if (e.signal !== null) parts.push(`signal ${oneLine(e.signal)}`);
  if (e.truncated) parts.push('[cut]');
  return parts.join(' · ');
}

/** `12 ms`, `1.25 s`: what the duration decoration and hover say. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

/** Program text as lines at PROGRAM_INDENT: at most `limit` of them, each at most EXECUTION_LINE_WIDTH wide. */
function programText(text: string, limit: number): { shown: string[]; omitted: number } {
  // A lone CR (a progress bar redrawing its line) ends a line too, as a terminal would show it.
  const all = text.replace(/\r\n?/g, '\n').split('\n');
  if (all.length > 1 && all[all.length - 1] === '') all.pop();
  if (all.length === 1 && all[0] === '') return { shown: [`${PROGRAM_INDENT}(empty)`], omitted: 0 };
  const shown = all.slice(0, limit).map((l) => {
    const visible = printable(l);
    const line = visible.length > EXECUTION_LINE_WIDTH
      ? `${visible.slice(0, EXECUTION_LINE_WIDTH)}… (${visible.length - EXECUTION_LINE_WIDTH} more characters)`
      : visible;
    return line === '' ? '' : PROGRAM_INDENT + line;
  });
  return { shown, omitted: all.length - shown.length };
}

/** C0 controls (but tab) and DEL as their Unicode control pictures (␀, ␛, ␡): visible, and harmless to print. */
function printable(line: string): string {
  return line.replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, (c) => String.fromCharCode(c === '\u007f' ? 0x2421 : 0x2400 + c.charCodeAt(0)));
}

/**
 * The turn and its siblings in a fixed order: this trajectory's branches by index, then other
 * rollouts by trajectory and branch. The server orders siblings by trajectory already, but the
 * document must not depend on it (a reordered list would show as a diff).
 */
function branchesOf(turn: TurnWithSiblings): BranchAnnotation[] {
  const own = turn.trajectoryId;
  return [turn, ...turn.siblings]
    .map((s) => ({
      trajectoryId: s.trajectoryId,
      branch: s.branch,
      isThisTurn: s.id === turn.id,
      kept: s.kept,
      reward: s.reward,
      teamReward: s.teamReward,
      localReward: s.localReward,
      ...(s.advantage === undefined ? {} : { advantage: s.advantage }),
      ...(s.parseError === undefined ? {} : { parseError: s.parseError }),
      firstLine: firstLine(s.responseText),
    }))
    .sort((a, b) => Number(a.trajectoryId !== own) - Number(b.trajectoryId !== own) || a.trajectoryId - b.trajectoryId || a.branch - b.branch);
}

/** `▸ 2  +1.25  first line` per branch, columns padded so the list reads as a table. */
function branchLines(branches: readonly BranchAnnotation[], own: number): string[] {
  const labels = branches.map((b) => (b.trajectoryId === own ? String(b.branch) : `traj ${b.trajectoryId} · ${b.branch}`));
  const rewards = branches.map((b) => formatSigned(b.reward));
  const labelWidth = Math.max(...labels.map((l) => l.length));
  const rewardWidth = Math.max(...rewards.map((r) => r.length));
  return branches.map((b, i) => {
    const mark = b.isThisTurn ? '▸' : ' ';
    const flags = b.parseError === undefined ? '' : '[parse error] ';
    return `${INDENT}${mark} ${(labels[i] ?? '').padEnd(labelWidth)}  ${(rewards[i] ?? '').padStart(rewardWidth)}  ${flags}${b.firstLine}`;
  });
}

/** Text as indented lines; CRLF normalised, one trailing newline dropped, empty text marked. */
function indentText(text: string): string[] {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
  if (lines.length === 1 && lines[0] === '') return [`${INDENT}(empty)`];
  return lines.map((l) => (l === '' ? '' : INDENT + l));
}

function firstLine(text: string): string {
  const line = text.split(/\r\n?|\n/).find((l) => l.trim() !== '')?.trim() ?? '';
  if (line === '') return '(empty)';
  return line.length > FIRST_LINE_WIDTH ? `${line.slice(0, FIRST_LINE_WIDTH - 1)}…` : line;
}

/** Identifiers and error messages on a labelled line must not break it into two. */
function oneLine(text: string): string {
  return text.replace(/\s*[\r\n]+\s*/g, ' ⏎ ');
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** `+1.25`, `-0.50`, `0.00`: two decimals, explicit sign unless it rounds to zero. */
export function formatSigned(x: number): string {
  const abs = Math.abs(x).toFixed(2);
  if (abs === '0.00') return '0.00';
  return `${x < 0 ? '-' : '+'}${abs}`;
}

// ---- Annotation text: what decorations and hovers show ------------------------------------------

/** The inline annotation after a turn rule: `team +1.00 · local +0.25 · adv +0.84`. */
export function annotationLabel(a: TurnAnnotation): string {
  const parts = [`team ${formatSigned(a.teamReward)}`, `local ${formatSigned(a.localReward)}`];
  // Untrained samples (validation) have no advantage; "adv n/a" on every turn would be noise.
  if (a.advantage !== undefined) parts.push(`adv ${formatSigned(a.advantage)}`);
  // A parse error is not repeated here: the block's `parse` line, two lines down, says it with the
  // parser's words, and every character this adds is one more to cut off in a narrow editor.
  return parts.join(' · ');
}

/**
 * Which colour the annotation takes: the sign of the advantage (the learning signal) when the turn
 * was trained on, else of the combined reward.
 */
export function annotationSign(a: TurnAnnotation): 'positive' | 'negative' | 'zero' {
  const v = a.advantage ?? a.reward;
  const s = formatSigned(v);
  return s === '0.00' ? 'zero' : v > 0 ? 'positive' : 'negative';
}

/** Group statistics recomputed from the members, as the advantage was: mean and unbiased std. */
export function groupStats(a: TurnAnnotation): { mean: number; std: number } | undefined {
  if (a.groupId === undefined) return undefined;
  const r = a.branches.map((b) => b.reward);
  const mean = r.reduce((s, x) => s + x, 0) / r.length;
  const std = r.length < 2 ? 0 : Math.sqrt(r.reduce((s, x) => s + (x - mean) ** 2, 0) / (r.length - 1));
  return { mean, std };
}

/** The hover on a turn rule, as Markdown: the full reward breakdown and every branch's rewards. */
export function annotationHoverMarkdown(a: TurnAnnotation): string {
  const md: string[] = [];
  md.push(`**turn ${a.turn} · ${escapeMarkdown(a.agentId)}** (policy ${escapeMarkdown(a.policyId)}) — branch ${a.branch} of ${a.k}${a.kept ? ', kept' : ''}`);
  md.push('');
  // The branches first: VS Code's hover is at most a quarter of the editor tall (250 px at least)
  // and scrolls past that, and with the breakdown first only two branches showed (issue 32).
  md.push('| branch | reward | team | local | adv | |', '|---|---:|---:|---:|---:|---|');
  const own = a.branches.find((b) => b.isThisTurn)?.trajectoryId;
  for (const b of a.branches) {
    const label = b.isThisTurn ? `**▸ ${b.branch}**` : String(b.branch);
    // Under independent rollouts (GRPO baseline) the group spans trajectories; say whose sample it is.
    const where = b.trajectoryId === own ? '' : ` (traj ${b.trajectoryId})`;
    const note = [b.kept ? 'kept' : '', b.parseError === undefined ? '' : 'parse error'].filter((s) => s !== '').join(', ');
    const adv = b.advantage === undefined ? '—' : formatSigned(b.advantage);
    md.push(`| ${label}${where} | ${formatSigned(b.reward)} | ${formatSigned(b.teamReward)} | ${formatSigned(b.localReward)} | ${adv} | ${note} |`);
  }
  md.push('');
  md.push('| | |', '|---|---:|');
  md.push(`| team reward | ${formatSigned(a.teamReward)} |`);
  md.push(`| local reward | ${formatSigned(a.localReward)} |`);
  md.push(`| reward (α·team + local) | ${formatSigned(a.reward)} |`);
  md.push(`| advantage | ${a.advantage === undefined ? 'none (not trained on)' : formatSigned(a.advantage)} |`);
  const stats = groupStats(a);
  if (a.groupId !== undefined) {
    md.push(`| group | \`${a.groupId.replace(/`/g, "'")}\` · ${plural(a.groupSize ?? a.branches.length, 'sample')} |`);
    if (stats) md.push(`| group mean / std | ${formatSigned(stats.mean)} / ${stats.std.toFixed(2)} |`);
  }
  if (a.parseError !== undefined) md.push(`| parse error | ${escapeMarkdown(oneLine(a.parseError))} |`);
  return md.join('\n');
}

/** Escapes Markdown syntax in text that comes from the run (agent ids, parse errors). */
export function escapeMarkdown(text: string): string {
  return text.replace(/[\\`*_{}[\]()#+\-.!|<>~]/g, '\\$&');
}

/** The after-line annotation on a program's header: its wall-clock time, kept out of the text. */
export function executionLabel(e: ExecutionAnnotation): string {
  return formatDuration(e.durationMs);
}

/** The hover on a program's header, as Markdown: how it ended, its time, and what the document left out. */
export function executionHoverMarkdown(e: ExecutionAnnotation): string {
  const md: string[] = [];
  md.push(`**program ${e.index + 1}** — ${escapeMarkdown(statusSentence(e))}`);
  md.push('');
  md.push('| | |', '|---|---|');
  md.push(`| status | ${e.status} |`);
  md.push(`| exit code | ${e.exitCode === null ? '—' : String(e.exitCode)} |`);
  md.push(`| signal | ${e.signal === null ? '—' : escapeMarkdown(oneLine(e.signal))} |`);
  md.push(`| time | ${formatDuration(e.durationMs)} |`);
  if (e.truncated) md.push('| output | cut by the sandbox at its output limit |');
  const left = (['code', 'stdin', 'stdout', 'stderr'] as const).filter((k) => e.omittedLines[k] > 0).map((k) => `${k} ${plural(e.omittedLines[k], 'line')}`);
  if (left.length > 0) md.push(`| not shown here | ${left.join(', ')} (the inspector shows them) |`);
  return md.join('\n');
}

function statusSentence(e: ExecutionAnnotation): string {
  switch (e.status) {
    case 'ok': return 'exited with status 0';
    case 'error': return e.signal !== null ? `stopped by ${e.signal}` : `exited with status ${String(e.exitCode)}`;
    case 'timeout': return 'hit the time limit and was killed';
    case 'output-limit': return 'wrote more than the output limit and was killed';
    case 'refused': return 'never ran: the sandbox could not start it (see stderr)';
  }
}

/** The program whose header is on `line`, with its turn, if any. */
export function executionAtHeaderLine(rendered: RenderedTrajectory, line: number): ExecutionAnnotation | undefined {
  for (const t of rendered.turns) {
    if (line < t.startLine || line > t.endLine) continue;
    return t.executions.find((e) => e.headerLine === line);
  }
  return undefined;
}

/** The turn whose rule or reward line is on `line`, if any. */
export function turnAtHeaderLine(rendered: RenderedTrajectory, line: number): TurnAnnotation | undefined {
  return rendered.turns.find((t) => t.headerLine === line || t.rewardLine === line);
}
