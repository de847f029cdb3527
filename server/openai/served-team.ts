/**
 * An experiment's team as served models: each base model under its id, each policy under its id
 * (LoRA policies as adapters on their base, sharing its one resident copy; full-weight policies
 * alone), at a run checkpoint or as the config declares them.
 */
import type { Engine } from '../runtime/engine.ts';
import type { ResolvedExperiment } from '../rl/experiment.ts';
import { loadTeamPolicies } from '../runs/checkpoint-weights.ts';
import { ServedModels } from './served-models.ts';

export async function servedTeam(engine: Engine, exp: ResolvedExperiment, bases: ReadonlyMap<string, ReadonlyMap<string, Float32Array>>, checkpointDir: string | null): Promise<ServedModels> {
  const models = new ServedModels({ engine, tokenizer: exp.tokenizer, decode: exp.rollout, optimizer: exp.optimizer });
  for (const [id, spec] of exp.models) {
    const weights = bases.get(id);
    if (!weights) throw new Error(`no weights for model '${id}'`);
    await models.addBase({ id, config: spec.config, weights });
  }
  const policies = await loadTeamPolicies(engine, exp, bases, checkpointDir);
  for (const [id, policy] of policies) {
    const spec = exp.policies.get(id)!;
    models.addPolicy(id, policy, spec.lora ? spec.model : null);
  }
  return models;
}
