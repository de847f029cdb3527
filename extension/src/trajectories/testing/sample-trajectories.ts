/**
 * Hand-made trajectories for the unit tests: small enough to check by eye, shaped like what
 * `trajectory/get` returns (kept turns in acting order, siblings ordered by trajectory then branch).
 */
import type { Execution, TrajectoryDetail, TurnRecord, TurnWithSiblings } from '../../../../server/protocol/trajectory.ts';

type TurnFields = Omit<TurnRecord, 'promptTokens' | 'responseTokens' | 'logprobs'>;

/** A turn row; token arrays are irrelevant to the document, so they are filled in trivially. */
export function turnRecord(fields: TurnFields): TurnRecord {
  return { ...fields, promptTokens: [1, 2], responseTokens: [3], logprobs: [-0.5] };
}

export function keptTurn(fields: TurnFields, siblings: TurnRecord[]): TurnWithSiblings {
  return { ...turnRecord(fields), siblings };
}

export interface SampleOptions {
  readonly id?: number;
  readonly step?: number;
  /** Offset added to every reward and advantage, to make a "later step" of the same task. */
  readonly shift?: number;
  readonly success?: boolean;
}

/**
 * Plan-path, one episode of two turns under tree sampling with K = 4 (a `shift` moves the team
 * rewards of every branch alike, so the advantages stay as they are):
 * turn 0 `tool` kept branch 2 (the best); turn 1 `plan` where every branch failed to parse, all
 * rewards tie (zero variance, advantage 0) and the lowest index was kept.
 */
export function sampleDetail(o: SampleOptions = {}): TrajectoryDetail {
  const id = o.id ?? 12;
  const d = o.shift ?? 0;
  let rowId = id * 100;
  const row = (turn: number, agentId: string, branch: number, kept: boolean, team: number, local: number, extra: Partial<TurnFields> = {}): TurnFields => ({
    id: ++rowId,
    trajectoryId: id,
    turn,
    agentId,
    policyId: agentId,
    branch,
    kept,
    promptText: '',
    responseText: '',
    teamReward: team + d,
    localReward: local,
    reward: team + d + local,
    ...extra,
  });
  const tool = (b: number, kept: boolean, team: number, local: number, adv: number, response: string) =>
    row(0, 'tool', b, kept, team, local, { advantage: adv, groupId: '0/tool/0', responseText: response, promptText: 'Grid 3x3.\n\nFind a path from S to G.\n' });
  const plan = (b: number, kept: boolean) =>
    row(1, 'plan', b, kept, -0.5, 0, { advantage: 0, groupId: '0/plan/1', responseText: `I think\r\nwe go ${b}`, parseError: 'no MOVE line', promptText: 'Tool says: path S-R-G' });
  return {
    trajectory: {
      id,
      runId: 'run-a',
      step: o.step ?? 3,
      phase: 'train',
      envName: 'plan-path',
      envSeed: 1042,
      envInstance: 0,
      rollout: 0,
      success: o.success ?? true,
      teamReward: 0.5 + d,
      localReward: 0.25,
      turnCount: 2,
    },
    turns: [
      // Rewards 0, -0.25, +1.25, +1.00: mean 0.5, unbiased std 0.736, so advantages -0.68, -1.02, +1.02, +0.68.
      keptTurn(tool(2, true, 1, 0.25, 1.02, 'MOVE right\nthen down'), [
        turnRecord(tool(0, false, 0, 0, -0.68, 'MOVE up')),
        turnRecord(tool(1, false, 0, -0.25, -1.02, '')),
        turnRecord(tool(3, false, 1, 0, 0.68, '  MOVE right\n')),
      ]),
      keptTurn(plan(0, true), [turnRecord(plan(1, false)), turnRecord(plan(2, false)), turnRecord(plan(3, false))]),
    ],
  };
}

/**
 * Programs as a math tool agent runs them: one that printed its answer, one that was killed at the
 * output limit (stdout cut, 100 lines of it), and one the sandbox refused. `slower` multiplies every
 * duration, to make "the same programs on another run".
 */
export function samplePrograms(slower = 1): Execution[] {
  return [
    {
      language: 'python', code: 'n = int(input())\nprint(n * (n + 1) // 2)\n', stdin: '10\n', status: 'ok', exitCode: 0, signal: null,
      stdout: '55\n', stderr: '', truncated: false, durationMs: 12.4 * slower,
    },
    {
      language: 'python', code: 'i = 0\nwhile True:\n    print(i)\n    i += 1\n', stdin: '', status: 'output-limit', exitCode: null, signal: 'SIGKILL',
      stdout: Array.from({ length: 100 }, (_, i) => `${i}\n`).join(''), stderr: '\u001b[31mKilled\u001b[0m', truncated: true, durationMs: 840 * slower,
    },
    {
      language: 'python', code: 'import os', stdin: '', status: 'refused', exitCode: null, signal: null,
      stdout: '', stderr: 'sandbox: could not start python3', truncated: false, durationMs: 0,
    },
  ];
}

/** sampleDetail whose first turn (the tool's kept branch) ran `samplePrograms(slower)`. */
export function sampleDetailWithPrograms(o: SampleOptions = {}, slower = 1): TrajectoryDetail {
  const detail = sampleDetail(o);
  const [tool, ...rest] = detail.turns;
  if (tool === undefined) throw new Error('sampleDetail has a first turn');
  return { ...detail, turns: [{ ...tool, executions: samplePrograms(slower) }, ...rest] };
}
