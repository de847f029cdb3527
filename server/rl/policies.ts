/**
 * Builds the policies of an experiment on an engine: full fine-tuning for L0/L1/L3, one LoRA
 * adapter per policy on a shared base for L2. Adapters start as PEFT does (B = 0), so an L2 team
 * starts exactly at its warm-started base. LoRA policies over one model share its frozen base in
 * the engine (one resident copy, `baseKey` = the model id) and their compiled sessions.
 */
import { initLoraParameters, parseLoraConfig } from '../models/lora.ts';
import { Policy } from '../models/policy.ts';
import type { Engine } from '../runtime/engine.ts';
import type { ProgramRunner } from '../envs/program-acts.ts';
import type { ResolvedExperiment } from './experiment.ts';
import type { RolloutContext } from './rollout.ts';

/** A stable 31-bit seed from a string (policy ids seed their adapters). */
export function stringSeed(s: string, base: number): number {
  let h = base >>> 0;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h & 0x7fffffff;
}

export async function createPolicies(engine: Engine, exp: ResolvedExperiment, baseWeights: ReadonlyMap<string, ReadonlyMap<string, Float32Array>>): Promise<Map<string, Policy>> {
  const out = new Map<string, Policy>();
  for (const [id, spec] of exp.policies) {
    const model = exp.models.get(spec.model);
    const weights = baseWeights.get(spec.model);
    if (!model || !weights) throw new Error(`policy '${id}': unknown model '${spec.model}'`);
    const adapter = spec.lora ? initLoraParameters(model.config, parseLoraConfig({ rank: spec.lora.rank, alpha: spec.lora.alpha, targets: [...spec.lora.targets] }), stringSeed(id, exp.seed)) : undefined;
    out.set(
      id,
      await Policy.create(engine, {
        id,
        config: model.config,
        weights,
        lora: spec.lora,
        ...(adapter ? { adapter } : {}),
        optimizer: exp.optimizer,
        ...(spec.lora ? { baseKey: spec.model } : {}),
        microBatch: { sequences: exp.algorithm.microBatch, ...(exp.training.microBatchTokens ? { tokens: exp.training.microBatchTokens } : {}) },
        kl: exp.algorithm.klCoef > 0,
        entropy: exp.algorithm.entropyCoef > 0,
        decode: exp.rollout,
        // Padded vocabulary rows (a Hugging Face model's embedding is larger than its tokenizer).
        maskedTokens: exp.tokenizer.unusedIds(model.config.vocabSize),
      }),
    );
  }
  return out;
}

export function routingContext(exp: ResolvedExperiment, policies: ReadonlyMap<string, Policy>, runPrograms?: ProgramRunner): RolloutContext {
  return {
    ...(runPrograms ? { runPrograms } : {}),
    tokenizer: exp.tokenizer,
    route: (agent) => {
      const policyId = exp.router.get(agent);
      const policy = policyId === undefined ? undefined : policies.get(policyId);
      if (policyId === undefined || !policy) throw new Error(`no policy routed for agent '${agent}'`);
      return { policyId, policy };
    },
  };
}
