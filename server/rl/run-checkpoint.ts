/**
 * Checkpoints of a training run, in its run folder:
 *   checkpoints/warmstart/<modelId>/   the warm-started base model (config.json + model.safetensors)
 *   checkpoints/step-<n>/              history checkpoints (every `checkpointEvery` steps, and the last)
 *   checkpoints/resume/                the state after the last finished step, replaced every step
 *   checkpoints/best.json              which validated step scored best on the validation seeds
 *                                      (every new best also gets a step-<n> checkpoint)
 *   checkpoints/warmup-<modelId>/      a warm start in progress (the model being trained as policy
 *                                      `warm-start`, and warmup.json: its step, loss curve and DAgger
 *                                      states), removed once the warm start is done
 * A policy's state is `<policyId>.safetensors` (its trainable tensors: the adapter with LoRA, all
 * weights otherwise), `<policyId>.optim.safetensors` (AdamW moments) and `state.json`.
 * Every folder is written under a temporary name and renamed into place, so a crash leaves
 * either the previous complete checkpoint or the new complete one.
 */
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { z } from 'zod';
import { writeTextFileAtomic } from '../models/atomic-write.ts';
import type { Policy } from '../models/policy.ts';
import { readSafetensorsFile, writeSafetensorsFile } from '../models/safetensors.ts';

const stateSchema = z.object({
  /** RL step the checkpoint was taken after (0 = before any RL step). */
  step: z.number().int().min(0),
  policies: z.record(z.string(), z.object({ optimizerSteps: z.number().int().min(0), nonFiniteSkips: z.number().int().min(0) })),
});
export type CheckpointState = z.infer<typeof stateSchema>;

export const checkpointsDir = (runDir: string) => join(runDir, 'checkpoints');
export const resumeDir = (runDir: string) => join(checkpointsDir(runDir), 'resume');
export const stepDir = (runDir: string, step: number) => join(checkpointsDir(runDir), `step-${step}`);
export const warmStartDir = (runDir: string, modelId: string) => join(checkpointsDir(runDir), 'warmstart', modelId);
export const bestFile = (runDir: string) => join(checkpointsDir(runDir), 'best.json');
export const warmUpDir = (runDir: string, modelId: string) => join(checkpointsDir(runDir), `warmup-${modelId}`);
const WARM_UP_FILE = 'warmup.json';

/** warmup.json: where a warm start stood when its checkpoint was written. */
const warmUpStateSchema = z.object({
  /** The warm-start cache key of the settings it trains (a checkpoint of other settings is not continued). */
  key: z.string().min(1),
  /** Supervised steps done. */
  step: z.int().nonnegative(),
  steps: z.int().positive(),
  /** The first step's loss and the smoothed loss at `step`; null when not finite. */
  firstLoss: z.number().nullable(),
  loss: z.number().nullable(),
  /** The smoothed loss curve so far (thinned to a bounded number of points). */
  points: z.array(z.object({ step: z.int().positive(), loss: z.number() })),
  /** The states DAgger rounds so far added to the demonstrations, as token ids. */
  dagger: z.array(z.object({ tokens: z.array(z.int().nonnegative()), promptLength: z.int().nonnegative() })),
});
export type WarmUpState = z.infer<typeof warmUpStateSchema>;

const bestSchema = z.object({
  /** The validated step (0: the warm-started policy) whose checkpoint is the best so far. */
  step: z.number().int().min(0),
  /** Its validation success (0..1) and the episodes it was measured on. */
  validationSuccess: z.number().min(0).max(1),
  episodes: z.number().int().min(1),
});
export type BestValidation = z.infer<typeof bestSchema>;

/** Writes checkpoints/best.json (through a temporary file and a rename, so a crash leaves the old or the new one). */
export async function writeBest(runDir: string, best: BestValidation): Promise<void> {
  await mkdir(checkpointsDir(runDir), { recursive: true });
  await writeTextFileAtomic(bestFile(runDir), `${JSON.stringify(best, null, 2)}\n`);
}

/** Reads checkpoints/best.json, or null when the run has none (no validation yet, or a run from before it existed). Errors name the file. */
export async function readBest(runDir: string): Promise<BestValidation | null> {
  return readJsonFile(bestFile(runDir), bestSchema);
}

/** A small JSON file checked against its schema, or null when it does not exist. Errors name the file and what is wrong in it. */
async function readJsonFile<T>(file: string, schema: z.ZodType<T>): Promise<T | null> {
  if (!existsSync(file)) return null;
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, 'utf8'));
  } catch (e) {
    throw new Error(`${file}: not valid JSON (${e instanceof Error ? e.message : String(e)})`);
  }
  const r = schema.safeParse(raw);
  if (!r.success) throw new Error(`${file}: ${r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  return r.data;
}

/** Writes the policies' state (and `extra` text files) into `<dir>.tmp-<pid>`, then renames it to `dir`. */
async function writePolicies(dir: string, step: number, policies: ReadonlyMap<string, Policy>, extra: Readonly<Record<string, string>> = {}): Promise<void> {
  const tmp = `${dir}.tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  for (const [name, text] of Object.entries(extra)) await writeTextFileAtomic(join(tmp, name), text);
  const state: CheckpointState = { step, policies: {} };
  for (const [id, p] of policies) {
    const shapes = new Map(p.trainableShapes.map(([n, s]) => [n, s]));
    const tensors = await p.trainableTensors();
    await writeSafetensorsFile(join(tmp, `${id}.safetensors`), new Map([...tensors].map(([n, d]) => [n, { shape: shapes.get(n)!, data: d }])), { policy: id, step: String(step) });
    const optim = await p.optimizerState();
    await writeSafetensorsFile(join(tmp, `${id}.optim.safetensors`), new Map([...optim].map(([n, d]) => [n, { shape: shapes.get(n.replace(/\.(m|v)$/, ''))!, data: d }])));
    state.policies[id] = { optimizerSteps: p.step, nonFiniteSkips: p.nonFiniteSkips };
  }
  await writeTextFileAtomic(join(tmp, 'state.json'), `${JSON.stringify(state, null, 2)}\n`);
  const old = `${dir}.old-${process.pid}`;
  if (existsSync(dir)) await rename(dir, old);
  await rename(tmp, dir);
  await rm(old, { recursive: true, force: true });
}

/** Writes the resume state (after every step). */
export async function saveResumeState(runDir: string, step: number, policies: ReadonlyMap<string, Policy>, extra: Readonly<Record<string, string>> = {}): Promise<void> {
  await mkdir(checkpointsDir(runDir), { recursive: true });
  await writePolicies(resumeDir(runDir), step, policies, extra);
}

/** Writes a history checkpoint for `step`; returns its folder. */
export async function saveStepCheckpoint(runDir: string, step: number, policies: ReadonlyMap<string, Policy>, extra: Readonly<Record<string, string>> = {}): Promise<string> {
  await mkdir(checkpointsDir(runDir), { recursive: true });
  const dir = stepDir(runDir, step);
  await writePolicies(dir, step, policies, extra);
  return dir;
}

/**
 * Writes a warm start's checkpoint (the model it trains as policy `policyId`, its optimizer state
 * and `state`) into `dir`, through a temporary folder and a rename, as every checkpoint here.
 */
export async function saveWarmUpCheckpoint(dir: string, step: number, policyId: string, policy: Policy, state: WarmUpState): Promise<void> {
  await mkdir(dirname(dir), { recursive: true });
  await writePolicies(dir, step, new Map([[policyId, policy]]), { [WARM_UP_FILE]: `${JSON.stringify(warmUpStateSchema.parse(state))}\n` });
}

/** A warm start's checkpoint: its state, and a restore of its weights and optimizer into a policy. Null when there is none. Errors name the file. */
export async function readWarmUpCheckpoint(dir: string, policyId: string): Promise<{ state: WarmUpState; restore: (p: Policy) => Promise<void> } | null> {
  if ((await readCheckpointState(dir)) === null) return null;
  const state = await readJsonFile(join(dir, WARM_UP_FILE), warmUpStateSchema);
  if (!state) throw new Error(`${join(dir, WARM_UP_FILE)}: missing from the warm-up checkpoint`);
  return { state, restore: async (p) => void (await restorePolicies(dir, new Map([[policyId, p]]))) };
}

/** Removes a warm start's checkpoint (its warm start is done). */
export async function removeWarmUpCheckpoint(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

/** The warm-up checkpoints in a run's folder, by model: the step each reached and of how many. */
export async function warmUpProgressIn(runDir: string): Promise<Array<{ modelId: string; step: number; steps: number }>> {
  const out: Array<{ modelId: string; step: number; steps: number }> = [];
  for (const n of (await readdir(checkpointsDir(runDir)).catch(() => [] as string[])).sort()) {
    const m = /^warmup-([A-Za-z][A-Za-z0-9_-]*)$/.exec(n);
    if (!m) continue;
    const state = await readJsonFile(join(checkpointsDir(runDir), n, WARM_UP_FILE), warmUpStateSchema).catch(() => null);
    if (state) out.push({ modelId: m[1]!, step: state.step, steps: state.steps });
  }
  return out;
}

/** A crash between writePolicies' two renames leaves the previous checkpoint under `<dir>.old-<pid>` and no `<dir>`: put it back. */
async function recoverSetAside(dir: string): Promise<void> {
  if (existsSync(dir)) return;
  const names = await readdir(dirname(dir)).catch(() => [] as string[]);
  const aside = names.find((n) => n.startsWith(`${basename(dir)}.old-`) && existsSync(join(dirname(dir), n, 'state.json')));
  if (aside) await rename(join(dirname(dir), aside), dir);
}

/**
 * A temporary name a writer here gives a checkpoint folder before renaming it into place
 * (`<name>.tmp-<pid>`, `<name>.old-<pid>`), or writeFileAtomic a file (`.<name>.<pid>.<hex>.tmp`).
 */
const temporaryName = /^(?:(.+)\.(tmp|old)-\d+|\..+\.\d+\.[0-9a-f]+\.tmp)$/;

/**
 * Removes what writers that died left in a run's checkpoints folder (`step-<n>.tmp-<pid>/`,
 * `resume.tmp-<pid>/`, `warmup-<modelId>.tmp-<pid>/`, `warmstart/<modelId>.tmp-<pid>/`, best.json's temporary file, and a set-aside `<dir>.old-<pid>/` whose
 * replacement is in place; one whose replacement is missing is put back first). Only for a caller
 * that holds the run's lock: then no live process writes there, so every temporary name is an
 * orphan, whatever its pid. Returns the paths removed.
 */
export async function removeOrphanTemporaries(runDir: string): Promise<string[]> {
  // The warm-started models' copies (warmstart/<modelId>) are written under a temporary name too.
  const removed = await removeOrphansIn(checkpointsDir(runDir));
  return [...removed, ...(await removeOrphansIn(join(checkpointsDir(runDir), 'warmstart')))];
}

async function removeOrphansIn(root: string): Promise<string[]> {
  const names = await readdir(root).catch(() => [] as string[]);
  for (const n of names) {
    const m = temporaryName.exec(n);
    if (m?.[2] === 'old') await recoverSetAside(join(root, m[1]!));
  }
  const removed: string[] = [];
  for (const n of await readdir(root).catch(() => [] as string[])) {
    if (!temporaryName.test(n)) continue;
    const path = join(root, n);
    await rm(path, { recursive: true, force: true });
    removed.push(path);
  }
  return removed;
}

/** Reads a checkpoint folder's state, or null when there is none. Errors name the file. */
export async function readCheckpointState(dir: string): Promise<CheckpointState | null> {
  await recoverSetAside(dir);
  return readJsonFile(join(dir, 'state.json'), stateSchema);
}

/** Restores every policy from a checkpoint folder. */
export async function restorePolicies(dir: string, policies: ReadonlyMap<string, Policy>): Promise<CheckpointState> {
  const state = await readCheckpointState(dir);
  if (!state) throw new Error(`no checkpoint in ${dir} (state.json missing)`);
  for (const [id, p] of policies) {
    const ps = state.policies[id];
    if (!ps) throw new Error(`${join(dir, 'state.json')}: no state for policy '${id}'`);
    const tensors = await readSafetensorsFile(join(dir, `${id}.safetensors`));
    const optim = await readSafetensorsFile(join(dir, `${id}.optim.safetensors`));
    const t = new Map([...tensors.tensors].map(([n, v]) => [n, v.data]));
    for (const [name, shape] of p.trainableShapes) {
      const got = tensors.tensors.get(name);
      if (!got) throw new Error(`${join(dir, `${id}.safetensors`)}: missing tensor '${name}'`);
      if (got.shape.join(',') !== shape.join(',')) throw new Error(`${join(dir, `${id}.safetensors`)}: tensor '${name}' has shape [${got.shape.join(', ')}], expected [${shape.join(', ')}]`);
    }
    await p.restore(t, new Map([...optim.tensors].map(([n, v]) => [n, v.data])), ps.optimizerSteps);
    p.nonFiniteSkips = ps.nonFiniteSkips;
  }
  return state;
}
