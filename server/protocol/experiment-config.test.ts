// The experiment config: every shipped config is valid against the schema, the cross-field rules and
// its environment; configs/schema.json matches the zod schema; each rule fails with the exact path;
// messages name the allowed values. The test reaches into envs/ (protocol itself may not) to keep
// protocol's copy of the environment names honest.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createEnvironment, environmentNames as registryNames } from '../envs/environments.ts';
import { trainSeed } from '../envs/seed-ranges.ts';
import { ConfigError, formatConfigIssues, formatConfigPath, type ConfigIssue } from './config-errors.ts';
import {
  checkAgainstAgents,
  checkExperimentConfig,
  environmentNames,
  experimentConfigJsonSchemaText,
  parseExperimentConfig,
  safeParseExperimentConfig,
  type ExperimentConfig,
} from './experiment-config.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const configsDir = join(root, 'configs');
const schemaPath = join(configsDir, 'schema.json');

function configFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return configFiles(path);
    return e.name.endsWith('.json') && path !== schemaPath ? [path] : [];
  });
}

const readJson = (path: string): unknown => JSON.parse(readFileSync(path, 'utf8'));

/** The agents of the environment a config describes, from the real registry. */
function agentsOf(config: ExperimentConfig): readonly string[] {
  return createEnvironment(config.env.name, trainSeed(0), config.env.options, 'train').agents;
}

/** The flagship as raw JSON, to mutate into failing examples. */
function flagship(): Record<string, any> {
  return readJson(join(configsDir, 'plan-path', 'L2-lora.json')) as Record<string, any>;
}

function issuesOf(json: unknown): ConfigIssue[] {
  const r = safeParseExperimentConfig(json);
  assert.ok(!r.success, 'expected the config to be rejected');
  return r.issues;
}

/** Asserts that exactly one issue sits at `path` and that its message matches. */
function assertIssue(issues: readonly ConfigIssue[], path: string, message: RegExp | string): void {
  const at = issues.filter((i) => formatConfigPath(i.path) === path);
  const all = formatConfigIssues(issues, 'config');
  assert.equal(at.length, 1, `expected one issue at ${path}, got:\n${all}`);
  if (typeof message === 'string') assert.equal(at[0]!.message, message, all);
  else assert.match(at[0]!.message, message, all);
}

/**
 * `config` without its texts (`name`, `description`) and the fields at the dotted `paths`: what
 * two configs that may differ only there must share. Changes `config`.
 */
function sharedPart(config: Record<string, any>, paths: readonly string[]): Record<string, any> {
  for (const path of ['name', 'description', ...paths]) {
    const keys = path.split('.');
    const parent = keys.slice(0, -1).reduce<Record<string, any> | undefined>((o, k) => o?.[k], config);
    if (parent) delete parent[keys.at(-1)!];
  }
  return config;
}

describe('shipped configs', () => {
  const files = configFiles(configsDir);

  test('include the flagship and one config per environment and sensible level', () => {
    const names = files.map((f) => relative(configsDir, f).split('\\').join('/')).sort();
    for (const expected of [
      'plan-path/L0-single.json',
      'plan-path/L1-shared.json',
      'plan-path/L2-grpo.json',
      'plan-path/L2-lora.json',
      'plan-path/L3-separate.json',
      'sokoban/L2-lora.json',
      'sudoku/L1-shared.json',
      'sudoku/L2-lora.json',
      'sudoku/L2-lora-pad.json',
      'sudoku/L2-lora-6.json',
      'tic-tac-toe/L1-shared.json',
      'tic-tac-toe/L2-lora.json',
    ]) {
      assert.ok(names.includes(expected), `configs/${expected} is missing`);
    }
  });

  for (const file of files) {
    const name = relative(configsDir, file);
    test(`${name} is valid for the schema, the rules and its environment`, () => {
      const json = readJson(file);
      assert.equal((json as { $schema?: unknown }).$schema, '../schema.json', `${name}: "$schema" must be "../schema.json"`);
      const config = parseExperimentConfig(json, name);
      assert.deepEqual(checkExperimentConfig(config), []);
      // createEnvironment validates env.options with the environment's own schema.
      const agents = agentsOf(config);
      assert.deepEqual(checkAgainstAgents(config, agents), []);
      assert.equal(name.split(/[\\/]/)[0], config.env.name, 'configs live in a folder named after their environment');
      assert.ok(name.split(/[\\/]/)[1]!.startsWith(config.specialization), 'config file names start with their level');
    });
  }

  test('the GRPO baseline differs from the flagship only in the algorithm and its texts', () => {
    const grpo = readJson(join(configsDir, 'plan-path', 'L2-grpo.json')) as Record<string, any>;
    const flag = flagship();
    assert.equal(grpo['algorithm'].name, 'grpo');
    assert.equal(flag['algorithm'].name, 'at-grpo');
    const differ = ['algorithm.name'];
    assert.deepEqual(sharedPart(grpo, differ), sharedPart(flag, differ));
  });

  test("tic-tac-toe's PPO config differs from its L2-lora only in the algorithm's name, PPO's fields and the texts", () => {
    const ppo = readJson(join(configsDir, 'tic-tac-toe', 'L2-lora-ppo.json')) as Record<string, any>;
    const flag = readJson(join(configsDir, 'tic-tac-toe', 'L2-lora.json')) as Record<string, any>;
    assert.equal(ppo['algorithm'].name, 'ppo');
    const differ = ['algorithm.name', 'algorithm.gamma', 'algorithm.gaeLambda', 'algorithm.valueClip', 'algorithm.valueLr'];
    assert.deepEqual(sharedPart(ppo, differ), sharedPart(flag, differ));
  });

  test("sudoku's padded config differs from its L2-lora only in padEmptyLine, the warm start's steps and the texts", () => {
    const pad = readJson(join(configsDir, 'sudoku', 'L2-lora-pad.json')) as Record<string, any>;
    const base = readJson(join(configsDir, 'sudoku', 'L2-lora.json')) as Record<string, any>;
    assert.equal(pad['env'].options.padEmptyLine, true);
    assert.equal(pad['warmStart'].steps, 600);
    const differ = ['env.options.padEmptyLine', 'warmStart.steps'];
    assert.deepEqual(sharedPart(pad, differ), sharedPart(base, differ));
  });

  test("sudoku's 6-cell config differs from the padded one only in the empty cells, the warm start's loss target, the RL steps and the texts", () => {
    const six = readJson(join(configsDir, 'sudoku', 'L2-lora-6.json')) as Record<string, any>;
    const pad = readJson(join(configsDir, 'sudoku', 'L2-lora-pad.json')) as Record<string, any>;
    assert.equal(six['env'].options.emptyCells, 6);
    assert.equal(six['warmStart'].stopAtLoss, 0.15);
    assert.equal(six['training'].steps, 80);
    const differ = ['env.options.emptyCells', 'warmStart.stopAtLoss', 'training.steps'];
    assert.deepEqual(sharedPart(six, differ), sharedPart(pad, differ));
  });

  test("sudoku's 6-cell GRPO baseline differs from the 6-cell team only in the algorithm and the texts", () => {
    const grpo = readJson(join(configsDir, 'sudoku', 'L2-grpo-6.json')) as Record<string, any>;
    const six = readJson(join(configsDir, 'sudoku', 'L2-lora-6.json')) as Record<string, any>;
    assert.equal(grpo['algorithm'].name, 'grpo');
    assert.equal(six['algorithm'].name, 'at-grpo');
    const differ = ['algorithm.name'];
    assert.deepEqual(sharedPart(grpo, differ), sharedPart(six, differ));
  });

  test("sudoku's 6-cell single agent has the 6-cell team's budget: it differs only in the agents, the team's planAccepts and the texts", () => {
    const single = readJson(join(configsDir, 'sudoku', 'L0-single-6.json')) as Record<string, any>;
    const six = readJson(join(configsDir, 'sudoku', 'L2-lora-6.json')) as Record<string, any>;
    assert.equal(single['env'].options.variant, 'single');
    assert.equal(single['specialization'], 'L0');
    assert.deepEqual(single['router'], { solo: 'solo-lora' });
    assert.deepEqual(single['policies']['solo-lora'], six['policies']['tool-lora'], "the solo adapter is one of the team's");
    const differ = ['env.options.variant', 'env.options.planAccepts', 'specialization', 'policies', 'router'];
    assert.deepEqual(sharedPart(single, differ), sharedPart(six, differ));
  });

  test("math's mod + linear configs differ from their add + mul ones only in the tiers and the texts", () => {
    for (const level of ['L2-lora', 'L0-single']) {
      const harder = readJson(join(configsDir, 'math', `${level}-mod-linear.json`)) as Record<string, any>;
      const base = readJson(join(configsDir, 'math', `${level}.json`)) as Record<string, any>;
      assert.deepEqual(harder['env'].options.tiers, ['mod', 'linear'], level);
      assert.deepEqual(sharedPart(harder, ['env.options.tiers']), sharedPart(base, ['env.options.tiers']), level);
    }
  });
});

describe('configs/schema.json', () => {
  test('is up to date with the zod schema', () => {
    const stale = 'configs/schema.json is stale: regenerate it with `npm run schema` (node --import tsx server/protocol/generate-schemas.ts)';
    let current: string;
    try {
      current = readFileSync(schemaPath, 'utf8');
    } catch {
      assert.fail(stale);
    }
    assert.ok(current === experimentConfigJsonSchemaText(), stale);
  });

  test('describes every field (the hover text in the editor)', () => {
    const missing: string[] = [];
    const walk = (node: unknown, path: string): void => {
      if (typeof node !== 'object' || node === null) return;
      const n = node as Record<string, unknown>;
      if (typeof n['properties'] === 'object' && n['properties'] !== null) {
        for (const [key, child] of Object.entries(n['properties'] as Record<string, unknown>)) {
          if (typeof (child as { description?: unknown }).description !== 'string') missing.push(`${path}.${key}`);
          walk(child, `${path}.${key}`);
        }
      }
      for (const k of ['additionalProperties', 'items']) walk(n[k], `${path}.*`);
      for (const k of ['oneOf', 'anyOf']) if (Array.isArray(n[k])) for (const o of n[k]) walk(o, path);
    };
    walk(JSON.parse(experimentConfigJsonSchemaText()), '');
    assert.deepEqual(missing, []);
  });
});

describe("protocol's copies of server names", () => {
  test('environment names equal the registry', () => {
    assert.deepEqual([...environmentNames], [...registryNames]);
  });
});

describe('defaults', () => {
  test('a minimal config gets every default', () => {
    const config = parseExperimentConfig(
      {
        name: 'minimal',
        env: { name: 'plan-path' },
        specialization: 'L2',
        policies: { a: { model: 'base', lora: { rank: 4 } }, b: { model: 'base', lora: { rank: 4 } } },
        router: { tool: 'a', plan: 'b' },
      },
      'minimal.json',
    );
    assert.equal(config.seed, 1);
    assert.deepEqual(config.env.options, {});
    assert.equal(config.env.promptStyle, 'terse');
    assert.deepEqual(config.models, { base: { preset: 'default' } });
    assert.deepEqual(config.algorithm, {
      name: 'at-grpo',
      branches: 4,
      teamRewardWeight: 1,
      envsPerStep: 8,
      temperature: 1,
      topP: 1,
      topK: 0,
      maxNewTokens: 24,
      distinctBranches: false,
      advantageNorm: 'std',
      invalidAdvantage: null,
      gamma: 1,
      gaeLambda: 0.95,
      valueClip: 0.2,
      valueLr: 0.003,
      clipEps: 0.2,
      klCoef: 0,
      entropyCoef: 0,
      ppoEpochs: 1,
      miniBatches: 4,
      microBatch: 64,
      curriculum: { kind: 'uniform', candidates: 64 },
      filters: { dropZeroVariance: false, dropLowestMeanFraction: 0 },
    });
    assert.deepEqual(config.optimizer, { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01, maxGradNorm: 1, schedule: { kind: 'constant' } });
    assert.deepEqual(config.warmStart, { enabled: true, demonstrations: 1500, steps: 300, batchSize: 32, lr: 3e-3, dagger: { rounds: 0, episodes: 500 }, proposals: { flawedEvery: 3, missingEvery: 0 } });
    assert.deepEqual(config.training, { steps: 100, validateEvery: 10, validationEpisodes: 64, testEpisodes: 0, validationTemperature: 0, checkpointEvery: 20, select: 'last' });
    assert.deepEqual(config.engine, { executionProvider: 'cpu' });
    assert.deepEqual(config.policies['a']?.lora, { rank: 4, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'], dropout: 0 });
  });
});

describe('structural errors name the path and what is allowed', () => {
  test('a bad enum lists the allowed values and the value found', () => {
    const c = flagship();
    c['algorithm'].name = 'sac';
    assertIssue(issuesOf(c), 'algorithm.name', 'expected one of "at-grpo", "grpo", "ppo"');
  });

  test('unknown keys are errors that list the allowed keys and suggest the closest', () => {
    const c = flagship();
    c['algorithm'].branchs = 4;
    c['trainig'] = {};
    c['policies']['tool-lora'].lora.rnak = 8;
    const issues = issuesOf(c);
    assertIssue(issues, 'algorithm.branchs', /^unknown key "branchs" \(did you mean "branches"\?\); allowed: "name", "branches", .*"filters"$/);
    assertIssue(issues, 'trainig', /^unknown key "trainig" \(did you mean "training"\?\); allowed: "\$schema", "name", .*"engine", "rollout", "sandbox"$/);
    assertIssue(issues, 'policies.tool-lora.lora.rnak', /did you mean "rank"\?\); allowed: "rank", "alpha", "targets", "dropout"$/);
  });

  test('an unknown key inside the chosen schedule lists that schedule\'s keys', () => {
    const c = flagship();
    c['optimizer'].schedule = { kind: 'cosine', warmupSteps: 2, totalSteps: 40, minLr: 0.1 };
    assertIssue(issuesOf(c), 'optimizer.schedule.minLr', /\(did you mean "minLrRatio"\?\); allowed: "kind", "warmupSteps", "totalSteps", "minLrRatio"$/);
  });

  test('a bad schedule kind lists the kinds', () => {
    const c = flagship();
    c['optimizer'].schedule = { kind: 'linear' };
    assertIssue(issuesOf(c), 'optimizer.schedule.kind', 'expected one of "constant", "cosine"');
  });

  test('types, ranges, missing fields and array items', () => {
    const c = flagship();
    c['algorithm'].branches = 1;
    c['algorithm'].envsPerStep = 2.5;
    c['algorithm'].ppoEpochs = 0;
    c['algorithm'].filters = { dropLowestMeanFraction: 1 };
    c['seed'] = 'one';
    delete c['specialization'];
    c['policies']['plan-lora'].lora.targets = ['q', 'qkv'];
    const issues = issuesOf(c);
    assertIssue(issues, 'algorithm.branches', 'must be >= 2');
    assertIssue(issues, 'algorithm.envsPerStep', 'expected an integer, got a fractional number');
    assertIssue(issues, 'algorithm.ppoEpochs', 'must be >= 1');
    assertIssue(issues, 'algorithm.filters.dropLowestMeanFraction', 'must be < 1');
    assertIssue(issues, 'seed', 'expected a number, got a string');
    assertIssue(issues, 'specialization', 'expected one of "L0", "L1", "L2", "L3", but it is missing');
    assertIssue(issues, 'policies.plan-lora.lora.targets[1]', 'expected one of "q", "k", "v", "o", "gate", "up", "down"');
  });

  test('ids must be usable as names', () => {
    const c = flagship();
    c['policies']['plan lora'] = c['policies']['plan-lora'];
    assertIssue(issuesOf(c), 'policies.plan lora', /^invalid name "plan lora": must start with a letter/);
  });

  test('a model needs exactly one source', () => {
    const c = flagship();
    c['models'].base = { preset: 'default', checkpoint: './ckpt' };
    assertIssue(issuesOf(c), 'models.base', 'a model needs exactly one of "preset", "config", "checkpoint"; got "preset", "checkpoint"');
    c['models'].base = {};
    assertIssue(issuesOf(c), 'models.base', 'a model needs exactly one of "preset", "config", "checkpoint"; none is given');
  });

  test('an inline model architecture is checked like a model config', () => {
    const c = flagship();
    c['models'].base = { config: { vocabSize: 112, hiddenSize: 100, numLayers: 2, numHeads: 3, intermediateSize: 256 } };
    assertIssue(issuesOf(c), 'models.base.config.numHeads', 'numHeads (3) must divide hiddenSize (100), or headDim must be given');
  });

  test('parseExperimentConfig throws one error listing every issue as source: path: message', () => {
    const c = flagship();
    c['algorithm'].name = 'sac';
    c['engine'].executionProvider = 'tpu';
    assert.throws(
      () => parseExperimentConfig(c, 'configs/x.json'),
      (e: unknown) => {
        assert.ok(e instanceof ConfigError);
        assert.equal(e.source, 'configs/x.json');
        assert.equal(e.issues.length, 2);
        assert.equal(
          e.message,
          'invalid config configs/x.json (2 problems):\n' +
            'configs/x.json: algorithm.name: expected one of "at-grpo", "grpo", "ppo"\n' +
            'configs/x.json: engine.executionProvider: expected one of "cpu", "cuda", "webgpu", "auto"',
        );
        return true;
      },
    );
  });

  test('a non-object names the root', () => {
    assertIssue(issuesOf([1, 2]), '(root)', 'expected an object, got an array');
  });
});

describe('cross-field rules fail with the exact path', () => {
  test('router targets must be declared policies', () => {
    const c = flagship();
    c['router'].plan = 'plan-lroa';
    const issues = issuesOf(c);
    assertIssue(issues, 'router.plan', 'names no declared policy (did you mean "plan-lora"?); declared policies: "tool-lora", "plan-lora"');
    assertIssue(issues, 'policies.plan-lora', 'policy "plan-lora" is not used: no agent in "router" maps to it');
  });

  test('ids are looked up as own keys, not on the prototype', () => {
    const c = flagship();
    c['router'].plan = 'constructor';
    assertIssue(issuesOf(c), 'router.plan', 'names no declared policy; declared policies: "tool-lora", "plan-lora"');
  });

  test('policy models must be declared, and declared models used', () => {
    const c = flagship();
    c['models'] = { bsae: { preset: 'default' }, spare: { preset: 'medium' } };
    const issues = issuesOf(c);
    assertIssue(issues, 'policies.tool-lora.model', 'names no declared model (did you mean "bsae"?); declared models: "bsae", "spare"');
    assertIssue(issues, 'models.spare', 'model "spare" is not used by any policy');
  });

  test('the router maps at least one agent', () => {
    const c = flagship();
    c['router'] = {};
    assertIssue(issuesOf(c), 'router', 'must map at least one agent to a policy');
  });

  test('L0: exactly one agent and one policy', () => {
    const c = flagship();
    c['specialization'] = 'L0';
    const issues = issuesOf(c);
    assertIssue(issues, 'router', 'L0 (single agent) needs exactly one agent, got 2 ("tool", "plan")');
    assertIssue(issues, 'policies', 'L0 (single agent) needs exactly one policy, got 2 ("tool-lora", "plan-lora")');
  });

  test('L1: one policy, no LoRA', () => {
    const c = flagship();
    c['specialization'] = 'L1';
    const issues = issuesOf(c);
    assertIssue(issues, 'policies', /^L1 \(one shared policy\) needs exactly one policy for all agents, got 2/);
    assertIssue(issues, 'policies.tool-lora.lora', /^L1 \(one shared policy\) trains the shared model itself and takes no LoRA adapter/);
  });

  test('L2: every policy has LoRA on the same base model, one policy per agent', () => {
    const c = flagship();
    c['models'].other = { preset: 'default' };
    c['policies']['plan-lora'].model = 'other';
    delete c['policies']['tool-lora'].lora;
    let issues = issuesOf(c);
    assertIssue(issues, 'policies.tool-lora', 'L2 (a LoRA adapter per agent) needs a "lora" adapter in every policy');
    assertIssue(issues, 'policies.plan-lora.model', 'L2 (a LoRA adapter per agent) puts every adapter on one base model: expected the model of policy "tool-lora"');

    const shared = flagship();
    shared['router'].plan = 'tool-lora';
    delete shared['policies']['plan-lora'];
    issues = issuesOf(shared);
    assertIssue(issues, 'router.plan', 'L2 (a LoRA adapter per agent) gives each agent its own policy, but "plan" shares its policy with "tool"');
  });

  test('L3: no LoRA, a policy and a model per agent', () => {
    const c = flagship();
    c['specialization'] = 'L3';
    const issues = issuesOf(c);
    assertIssue(issues, 'policies.tool-lora.lora', /^L3 \(a model per agent\) trains each agent's own model and takes no LoRA adapter/);
    assertIssue(issues, 'policies.plan-lora.model', 'L3 (a model per agent) needs a separate model per policy, but this one is already used by policy "tool-lora"');
  });

  test('L3 allows models of different sizes', () => {
    const c = readJson(join(configsDir, 'plan-path', 'L3-separate.json')) as Record<string, any>;
    c['models']['plan-model'] = { preset: 'medium' };
    assert.ok(safeParseExperimentConfig(c).success);
  });

  test('validation and checkpoint intervals fit in the run', () => {
    const c = flagship();
    c['training'] = { steps: 5, validateEvery: 10, checkpointEvery: 6 };
    const issues = issuesOf(c);
    assertIssue(issues, 'training.validateEvery', 'must be at most training.steps');
    assertIssue(issues, 'training.checkpointEvery', 'must be at most training.steps');
  });

  test('a greedy-failures curriculum screens at least a step of tasks', () => {
    const c = flagship();
    c['algorithm'].curriculum = { kind: 'greedy-failures', candidates: 8 };
    assertIssue(issuesOf(c), 'algorithm.curriculum.candidates', 'must be at least algorithm.envsPerStep for greedy-failures');
    c['algorithm'].curriculum = { kind: 'greedy-failures', candidates: 64 };
    assert.ok(safeParseExperimentConfig(c).success);
  });

  test('a cosine schedule warms up for less than its length', () => {
    const c = flagship();
    c['optimizer'].schedule = { kind: 'cosine', warmupSteps: 40, totalSteps: 40 };
    assertIssue(issuesOf(c), 'optimizer.schedule.warmupSteps', 'must be less than optimizer.schedule.totalSteps');
  });

  test('fp16 rollout weights are refused on the cpu provider, naming both fields', () => {
    const c = flagship();
    c['rollout'] = { weights: 'fp16' };
    c['engine'] = { executionProvider: 'cpu' };
    assertIssue(issuesOf(c), 'rollout.weights', /^fp16 rollout weights need a GPU execution provider, but engine\.executionProvider is "cpu"/);
    for (const executionProvider of ['webgpu', 'cuda', 'auto']) {
      c['engine'] = { executionProvider };
      assert.ok(safeParseExperimentConfig(c).success, `fp16 with ${executionProvider}`);
    }
  });

  test('distinctBranches is refused for grpo, which has no tree nodes', () => {
    const c = flagship();
    c['algorithm'].distinctBranches = true;
    assert.ok(safeParseExperimentConfig(c).success, 'at-grpo takes it');
    c['algorithm'].name = 'grpo';
    assertIssue(issuesOf(c), 'algorithm.distinctBranches', /^applies to at-grpo's tree nodes; grpo samples independent rollouts/);
  });

  test('invalidAdvantage is refused for ppo, whose baseline is the value head', () => {
    const c = flagship();
    c['algorithm'].invalidAdvantage = -1;
    assert.ok(safeParseExperimentConfig(c).success, 'at-grpo takes it');
    c['algorithm'].name = 'ppo';
    assertIssue(issuesOf(c), 'algorithm.invalidAdvantage', /^sets invalid acts apart from their group's baseline; ppo has no groups/);
    c['algorithm'].invalidAdvantage = null;
    assert.ok(safeParseExperimentConfig(c).success, 'ppo without it');
  });

  test('responses fit in an inline model\'s sequence length', () => {
    const c = flagship();
    c['models'].base = { config: { vocabSize: 112, hiddenSize: 64, numLayers: 2, numHeads: 2, intermediateSize: 128, maxSequenceLength: 24 } };
    assertIssue(issuesOf(c), 'algorithm.maxNewTokens', 'must be less than the maxSequenceLength of model "base", which also holds the prompt');
  });
});

describe('checkAgainstAgents', () => {
  const config = parseExperimentConfig(flagship(), 'flagship');

  test('accepts the environment\'s agents in any order', () => {
    assert.deepEqual(checkAgainstAgents(config, ['plan', 'tool']), []);
  });

  test('names unknown and missing agents', () => {
    const issues = checkAgainstAgents(config, ['tool', 'plna', 'critic']);
    assertIssue(issues, 'router.plan', 'unknown agent "plan" (did you mean "plna"?); plan-path has agents "tool", "plna", "critic"');
    assertIssue(issues, 'router', 'no policy for agents "plna", "critic" of plan-path (its agents: "tool", "plna", "critic")');
  });

  test('L0 needs a single-agent environment, and L1-L3 several agents', () => {
    const solo = parseExperimentConfig(readJson(join(configsDir, 'plan-path', 'L0-single.json')), 'L0');
    const issues = checkAgainstAgents(solo, ['tool', 'plan']);
    assertIssue(issues, 'specialization', /^L0 trains a single agent, but plan-path has 2 agents \("tool", "plan"\); for a puzzle, set env.options.variant to "single"$/);
    assertIssue(checkAgainstAgents(config, ['solo']), 'specialization', 'L2 is for several agents, but plan-path has one ("solo"); use L0');
  });

  test('the server can throw the issues as one ConfigError', () => {
    const e = new ConfigError('flagship.json', checkAgainstAgents(config, ['solo']));
    assert.match(e.message, /^invalid config flagship.json \(4 problems\):\nflagship.json: router.tool: unknown agent "tool"; plan-path has agents "solo"\n/);
  });
});

describe('messages never quote a value given', () => {
  // A config file may hold anything (a token pasted in the wrong field); messages go to logs,
  // clients and the run store, so they name the field and what is allowed, never the value.
  const secret = 'S3CRET-7f1c9a';
  test('wrong types, enums, bounds and references in several fields', () => {
    const c = flagship();
    c['seed'] = secret;
    c['env'].name = secret;
    c['specialization'] = secret;
    c['description'] = { note: secret };
    c['algorithm'].curriculum = { kind: secret };
    c['optimizer'].schedule = { kind: secret };
    c['policies']['plan-lora'].lora.targets = ['q', secret];
    c['training'].steps = `${secret}`;
    c['engine'].threads = 123456789;
    c['name'] = `${secret}${'x'.repeat(300)}`;
    const issues = issuesOf(c);
    assert.ok(issues.length >= 9, formatConfigIssues(issues, 'config'));
    for (const i of issues) {
      assert.ok(!i.message.includes('S3CRET'), `${formatConfigPath(i.path)}: ${i.message}`);
      assert.ok(!i.message.includes('123456789'), `${formatConfigPath(i.path)}: ${i.message}`);
    }
    assertIssue(issues, 'seed', 'expected a number, got a string');
    assertIssue(issues, 'specialization', 'expected one of "L0", "L1", "L2", "L3"');
  });

  test('cross-field rules name fields, not the values found', () => {
    const c = flagship();
    c['router'].plan = secret;
    c['policies']['tool-lora'].model = secret;
    const issues = issuesOf(c);
    assert.ok(issues.length >= 2);
    for (const i of issues) assert.ok(!i.message.includes('S3CRET'), `${formatConfigPath(i.path)}: ${i.message}`);
    assertIssue(issues, 'router.plan', /^names no declared policy/);
  });
});

describe('every size a config can set is bounded', () => {
  test("the issue's reproduction: a LoRA rank of 1,000,000", () => {
    const c = flagship();
    c['policies']['tool-lora'].lora.rank = 1_000_000;
    assertIssue(issuesOf(c), 'policies.tool-lora.lora.rank', 'must be <= 4096');
  });

  test('10^6 LoRA targets are refused at once, with one issue', () => {
    const c = flagship();
    c['policies']['tool-lora'].lora.targets = Array.from({ length: 1_000_000 }, (_, i) => i);
    const t0 = performance.now();
    const issues = issuesOf(c);
    assert.ok(performance.now() - t0 < 2000, 'took over 2 s');
    assert.equal(issues.length, 1, formatConfigIssues(issues.slice(0, 5), 'config'));
    assertIssue(issues, 'policies.tool-lora.lora.targets', 'must have at most 7 items');
  });

  test('model widths, layers, heads, vocabulary and sequence length', () => {
    const c = flagship();
    c['models'].base = { config: { vocabSize: 2_000_000, hiddenSize: 131_072, numLayers: 2000, numHeads: 2048, intermediateSize: 1_000_000, maxSequenceLength: 2_000_000 } };
    const issues = issuesOf(c);
    assertIssue(issues, 'models.base.config.vocabSize', 'must be <= 1048576');
    assertIssue(issues, 'models.base.config.hiddenSize', 'must be <= 65536');
    assertIssue(issues, 'models.base.config.numLayers', 'must be <= 1024');
    assertIssue(issues, 'models.base.config.numHeads', 'must be <= 1024');
    assertIssue(issues, 'models.base.config.intermediateSize', 'must be <= 524288');
    assertIssue(issues, 'models.base.config.maxSequenceLength', 'must be <= 1048576');
  });

  test('batch sizes, steps, demonstrations and token budgets', () => {
    const c = flagship();
    c['algorithm'].microBatch = 1e6;
    c['warmStart'] = { ...c['warmStart'], demonstrations: 1e7, steps: 1e7, batchSize: 1e6 };
    c['training'] = { ...c['training'], steps: 1e7, microBatchTokens: 1e9 };
    const issues = issuesOf(c);
    assertIssue(issues, 'algorithm.microBatch', 'must be <= 65536');
    assertIssue(issues, 'warmStart.demonstrations', 'must be <= 1000000');
    assertIssue(issues, 'warmStart.steps', 'must be <= 1000000');
    assertIssue(issues, 'warmStart.batchSize', 'must be <= 65536');
    assertIssue(issues, 'training.steps', 'must be <= 1000000');
    assertIssue(issues, 'training.microBatchTokens', 'must be <= 16777216');
  });

  test('strings and records', () => {
    const c = flagship();
    c['description'] = 'x'.repeat(20_000);
    c['models'].base = { checkpoint: 'd/'.repeat(3000) };
    c['env'].options = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`o${i}`, i]));
    for (let i = 0; i < 70; i++) c['policies'][`p${i}`] = { model: 'base', lora: { rank: 4 } };
    const issues = issuesOf(c);
    assertIssue(issues, 'description', 'must have at most 10000 characters');
    assertIssue(issues, 'models.base.checkpoint', 'must have at most 4096 characters');
    assertIssue(issues, 'env.options', 'must have at most 64 entries');
    assertIssue(issues, 'policies', 'must have at most 64 entries');
  });

  test('the JSON Schema carries the bounds for editors', () => {
    const schema = JSON.parse(experimentConfigJsonSchemaText()) as { properties: Record<string, any>; definitions?: unknown };
    const text = JSON.stringify(schema);
    assert.match(text, /"maximum":4096/);
    assert.equal(schema.properties['policies'].maxProperties, 64);
  });
});
