/**
 * Whether an experiment's prompts fit its models. Chat prompts (`env.promptStyle: "chat"`) carry
 * the rules in words and run to a thousand characters or more; through the embedded model's
 * character tokenizer that is past its 512-position context: positions the model never trained
 * on, beyond the fused decoder's RoPE tables (sized to maxSequenceLength), and `troupe models
 * inspect`'s greedy generation refuses them. A pretrained model's BPE tokenizer and chat template
 * make them a few hundred tokens, which can still pass a `maxSequenceLength` set low. Measured up
 * front instead, with the experiment's own tokenizer, on a solver episode of the first training
 * seed (later rounds add report lines, so every round's prompt counts), and reported as a config
 * error on `env.promptStyle`.
 */
import type { Environment } from '../envs/environment.ts';
import { programsOf } from '../envs/program-acts.ts';

/**
 * Room left in a prompt for what a program's run adds to it (math shows at most a 40-character
 * output line); counted in tokens, each at least a character.
 */
const PROGRAM_OUTPUT_MARGIN = 64;

/**
 * Every prompt of a solver episode from the start, played without running anything: this check
 * runs while a config is validated, where no sandbox is open. In an environment whose agents write
 * code the episode stops at the first program; then every agent's prompt at that point is counted
 * with PROGRAM_OUTPUT_MARGIN for the output its later prompts show.
 */
function solverPrompts(env: Environment): { agent: string; observation: string; margin: number }[] {
  const sim = env.clone();
  const out: { agent: string; observation: string; margin: number }[] = [];
  while (!sim.done) {
    const agent = sim.currentAgent();
    const response = sim.solution(agent);
    if (programsOf(sim, agent, response).length > 0) {
      for (const a of sim.agents) out.push({ agent: a, observation: sim.observe(a), margin: PROGRAM_OUTPUT_MARGIN });
      break;
    }
    out.push({ agent, observation: sim.observe(agent), margin: 0 });
    sim.act(agent, response);
  }
  return out;
}
import type { ConfigIssue } from '../protocol/config-errors.ts';
import type { ExperimentConfig } from '../protocol/experiment-config.ts';

interface PromptEncoder {
  encodePrompt(turns: ReadonlyArray<{ role: 'user'; text: string }>): Int32Array;
}

/**
 * Issues for each model whose agents' longest prompt plus `algorithm.maxNewTokens` exceeds the context of
 * the model its policy uses. `contexts` maps model ids to their `maxSequenceLength` for the models
 * `tok` tokenizes for (others are left out); `kind` says which tokenizer that is, for the advice.
 */
export function chatPromptFitIssues(c: ExperimentConfig, env: Environment, contexts: ReadonlyMap<string, number>, tok: PromptEncoder, kind: 'character' | 'pretrained' = 'character'): ConfigIssue[] {
  if (c.env.promptStyle !== 'chat') return [];
  const longest = new Map<string, number>();
  for (const d of solverPrompts(env)) {
    const n = tok.encodePrompt([{ role: 'user', text: d.observation }]).length + d.margin;
    longest.set(d.agent, Math.max(longest.get(d.agent) ?? 0, n));
  }
  // One issue per model, naming the agent with the longest prompt among those it serves.
  const worst = new Map<string, { agent: string; tokens: number }>();
  for (const [agent, tokens] of longest) {
    const policyId = c.router[agent];
    const modelId = policyId === undefined ? undefined : c.policies[policyId]?.model;
    if (modelId === undefined || !contexts.has(modelId)) continue;
    if (tokens > (worst.get(modelId)?.tokens ?? -1)) worst.set(modelId, { agent, tokens });
  }
  const issues: ConfigIssue[] = [];
  for (const [modelId, { agent, tokens }] of worst) {
    const context = contexts.get(modelId)!;
    if (tokens + c.algorithm.maxNewTokens <= context) continue;
    const past = `with algorithm.maxNewTokens ${c.algorithm.maxNewTokens} that is past model "${modelId}"'s context of ${context} tokens`;
    issues.push({
      path: ['env', 'promptStyle'],
      message:
        kind === 'character'
          ? `agent "${agent}"'s chat prompts run to ${tokens} tokens with the character tokenizer; ${past}. Chat prompts are for pretrained instruction-tuned models; the embedded model is trained on the terse ones (promptStyle "terse")`
          : `agent "${agent}"'s chat prompts run to ${tokens} tokens with the model's tokenizer and chat template; ${past}. Raise models.${modelId}.maxSequenceLength or lower algorithm.maxNewTokens`,
    });
  }
  return issues;
}
