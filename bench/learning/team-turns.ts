/**
 * Where a team loses: plays test episodes greedily from a run's checkpoint and counts, turn by
 * turn, what the planner did with the tool's proposal (the Plan-Path / Sudoku / Sokoban team
 * workflow: the tool proposes, the planner commits) and how many turns solved episodes took.
 *
 * Usage: node --import tsx bench/learning/team-turns.ts <run folder> [initial|latest|best|<step>] [episodes]
 *   e.g. node --import tsx bench/learning/team-turns.ts .troupe/runs/<run> initial 512
 *
 * A planner prompt carries `tool: <moves>` (and, with `verdictToPlanner`, `: … goal yes|no`); the
 * planner "copied" when its answer is exactly the proposal (or `accept`, with `planAccepts`), and
 * "solved" when its commit ended the episode solved. A single agent ('solo') is counted by the turns its solved episodes took.
 *
 * For a team it then plays the same seeds twice more: with a planner that copies every proposal
 * (and answers nothing when there is none) — the tool alone, the team's success if the planner
 * added nothing — and with the team's planner shown "tool: no valid proposal" in place of every
 * proposal — the planner alone, the team's success if the planner ignored the tool.
 *
 * TEAM_TURNS_EXAMPLES=N (env) also prints the first N spoiled proposals as `proposal -> commit`:
 * a proposal the report marks right ("goal yes"; needs `verdictToPlanner`) that the planner did
 * not copy, in a round after which the episode was not solved.
 */
import { acceptAnswer } from '../../server/envs/puzzle-environment.ts';
import { evaluate, evaluationOptions, TEST_SEED_OFFSET } from '../../server/rl/evaluate.ts';
import { routingContext } from '../../server/rl/policies.ts';
import type { RolloutContext, RolloutPolicy } from '../../server/rl/rollout.ts';
import { loadTeamPolicies } from '../../server/runs/checkpoint-weights.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { openRunArgs } from './run-args.ts';

const [dir, which = 'initial', n = '512'] = process.argv.slice(2);
const episodes = Number(n);
if (!Number.isSafeInteger(episodes) || episodes < 1) throw new Error(`episodes must be a positive integer, got '${n}'`);
const exampleCount = Number(process.env['TEAM_TURNS_EXAMPLES'] ?? '0');
if (!Number.isSafeInteger(exampleCount) || exampleCount < 0) throw new Error(`TEAM_TURNS_EXAMPLES must be a non-negative integer, got '${process.env['TEAM_TURNS_EXAMPLES']}'`);
const { folder, experiment: exp, checkpoint: ck, bases } = await openRunArgs('team-turns.ts <run folder> [initial|latest|best|<step>] [episodes]', dir, which);
const engine = await Engine.start({ executionProvider: exp.engine.executionProvider, log: () => {} });
const policies = await loadTeamPolicies(engine, exp, bases, ck.dir);
const play = (ctx: RolloutContext) =>
  evaluate(exp.env.make, ctx, evaluationOptions(exp, episodes, TEST_SEED_OFFSET));
const proposal = /^tool: ([A-Z]+)(?::.*goal (yes|no))?$/m;
const ctx = routingContext(exp, policies);
const ev = await play(ctx);
const tok = exp.tokenizer;
const copier: RolloutPolicy = {
  generate: async (prompts) => {
    const tokens = prompts.map((p) => tok.encodeResponse(proposal.exec(tok.decode(p, { specials: 'skip' }))?.[1] ?? ''));
    return { tokens, logprobs: tokens.map((t) => new Float32Array(t.length)), finish: tokens.map(() => 'stop' as const), prefillMs: 0, decodeMs: 0 };
  },
};
const team = exp.router.has('plan') && exp.router.has('tool');
const toolAlone = team ? await play({ ...ctx, route: (agent) => (agent === 'plan' ? { policyId: 'copy', policy: copier } : ctx.route(agent)) }) : null;
const blindPlanner = (planner: RolloutPolicy): RolloutPolicy => ({
  generate: (prompts, options) =>
    planner.generate(
      prompts.map((p) => {
        const text = tok.decode(p, { specials: 'skip' });
        const again = tok.encodePrompt([{ role: 'user', text }]);
        if (again.length !== p.length || again.some((t, i) => t !== p[i])) throw new Error('team-turns: a planner prompt does not re-encode to itself');
        return tok.encodePrompt([{ role: 'user', text: text.replace(proposal, 'tool: no valid proposal') }]);
      }),
      options,
    ),
});
const plannerAlone = team ? await play({ ...ctx, route: (agent) => (agent === 'plan' ? { policyId: 'blind', policy: blindPlanner(ctx.route('plan').policy) } : ctx.route(agent)) }) : null;
await engine.close();

const spoiled: string[] = [];
const counts = new Map<string, number>();
const count = (k: string) => counts.set(k, (counts.get(k) ?? 0) + 1);
for (const t of ev.trajectories) {
  count(t.success ? `solved in ${t.turns} turn(s)` : 'not solved');
  for (const s of t.samples.filter((x) => x.kept && x.agent === 'plan')) {
    const m = proposal.exec(s.prompt);
    const verdict = m ? (m[2] ? `goal ${m[2]}` : 'no verdict') : 'no proposal';
    const copied = m !== null && (s.response.trim() === m[1] || s.response.trim() === acceptAnswer); // planAccepts' 'accept' copies too
    const solved = t.success && t.turns === s.turn + 1;
    if (m?.[2] === 'yes' && !copied && !solved && spoiled.length < exampleCount) spoiled.push(`turn ${s.turn + 1}: ${m[1]} -> ${s.response.trim()}`);
    count(`turn ${s.turn + 1} planner: tool ${verdict}, ${copied ? 'copied' : 'answered otherwise'}${solved ? ', solved' : ''}`);
  }
}
console.log(`${exp.name} (${folder.runId}, checkpoint ${ck.label}): test success ${(100 * ev.success).toFixed(1)}% on ${ev.episodes} test seeds`);
for (const k of [...counts.keys()].sort()) console.log(`  ${k.padEnd(60)} ${String(counts.get(k)).padStart(5)}`);
if (toolAlone) console.log(`  with a planner that copies every proposal (the tool alone): test success ${(100 * toolAlone.success).toFixed(1)}%`);
if (plannerAlone) console.log(`  with the planner shown no proposal (the planner alone): test success ${(100 * plannerAlone.success).toFixed(1)}%`);
if (exampleCount > 0) console.log(`  spoiled proposals (right, not copied, episode not solved that round), first ${spoiled.length}:\n${spoiled.map((x) => `    ${x}`).join('\n')}`);
