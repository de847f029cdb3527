/**
 * The checks only the server can make, because they need the environment registry (protocol
 * imports nothing but zod): `env.options` against the environment's own options schema, and the
 * router against the environment's agents (which depend on the options: a puzzle's `variant`).
 * The trainer does the same in `rl/resolve-experiment.ts`; here the issues keep their paths so
 * the editor can underline the option or router key at fault.
 */
import { createEnvironment, environments, type EnvironmentName } from '../envs/environments.ts';
import { issuesFromZod, type ConfigIssue } from '../protocol/config-errors.ts';
import { checkAgainstAgents, type ExperimentConfig } from '../protocol/experiment-config.ts';
import { environmentNameOf, field } from './config-schema.ts';

/** The environment's options, validated; or the issues, with paths from the file's root. */
type OptionsResult = { ok: true; env: EnvironmentName; options: unknown } | { ok: false; issues: ConfigIssue[] };

/**
 * Validates `env.options` of a (possibly invalid) config value. Undefined when there is nothing to
 * check: no known environment named, or options that are not an object (the config schema reports
 * that itself).
 */
function checkOptions(config: unknown): OptionsResult | undefined {
  const env = environmentNameOf(config);
  if (env === undefined) return undefined;
  const raw = field(field(config, 'env'), 'options') ?? {};
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const schema = environments[env].optionsSchema;
  const r = schema.safeParse(raw);
  if (r.success) return { ok: true, env, options: r.data };
  const issues = issuesFromZod(r.error, schema, raw).map((i) => ({ path: ['env', 'options', ...i.path], message: `${i.message} (${env} option)` }));
  return { ok: false, issues };
}

// Agents depend only on (environment, options); creating an environment generates a puzzle, so
// the answer is kept for the few option sets an editing session goes through.
const agentCache = new Map<string, readonly string[] | Error>();
const agentCacheLimit = 64;

function agentsFor(env: EnvironmentName, options: unknown): readonly string[] | Error {
  const key = `${env}\u0000${JSON.stringify(options)}`;
  let agents = agentCache.get(key);
  if (agents === undefined) {
    try {
      agents = createEnvironment(env, 0, options).agents;
    } catch (e) {
      agents = e instanceof Error ? e : new Error(String(e));
    }
    if (agentCache.size >= agentCacheLimit) agentCache.clear();
    agentCache.set(key, agents);
  }
  return agents;
}

/** The agents of the environment a (possibly invalid) config value describes, if they can be known. */
export function agentsOf(config: unknown): readonly string[] | undefined {
  const r = checkOptions(config);
  if (r === undefined || !r.ok) return undefined;
  const agents = agentsFor(r.env, r.options);
  return agents instanceof Error ? undefined : agents;
}

/**
 * Issues with the environment: its options (checked whatever the rest of the config looks like)
 * and, once the whole config is valid (`config`), the router against its agents.
 */
export function environmentIssues(json: unknown, config: ExperimentConfig | undefined): ConfigIssue[] {
  const r = checkOptions(json);
  if (r === undefined) return [];
  if (!r.ok) return r.issues;
  if (config === undefined) return [];
  const agents = agentsFor(r.env, r.options);
  if (agents instanceof Error) return [{ path: ['env'], message: `cannot create ${r.env} with these options: ${agents.message}` }];
  return checkAgainstAgents(config, agents);
}
