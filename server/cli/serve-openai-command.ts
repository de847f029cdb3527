/**
 * `troupe serve-openai`: serves a run's team (or an experiment's untrained models) to any OpenAI
 * client, and to Troupe's own HTTP rollout backend, on Troupe's engine (server/openai).
 */
import { randomBytes } from 'node:crypto';
import { mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { DEFAULT_MAX_BODY_BYTES, OpenAiServer } from '../openai/openai-server.ts';
import type { ServedModels } from '../openai/served-models.ts';
import { servedTeam } from '../openai/served-team.ts';
import type { ResolvedExperiment } from '../rl/experiment.ts';
import { loadExperiment } from '../rl/resolve-experiment.ts';
import { Engine } from '../runtime/engine.ts';
import { checkpointChoiceHelp, openRunCheckpoint, parseCheckpointChoice, sourceWeights } from '../runs/checkpoint-weights.ts';
import { expectPositionals, integerFlag, parseCommandLine, printUsage, UsageError, type Command } from './command.ts';
import { displayPath } from './text-format.ts';

const usage = `usage: troupe serve-openai <run folder> [--checkpoint ${checkpointChoiceHelp}] [options]
       troupe serve-openai <experiment config.json> [options]

Serves models on Troupe's engine over an OpenAI-compatible HTTP API (vLLM's routes and fields):
GET /v1/models, POST /v1/completions (text or token-id prompts, n, seed, logprobs,
return_token_ids, prompt_logprobs, stream), POST /v1/chat/completions (the model's chat
template), POST /v1/load_lora_adapter and /v1/unload_lora_adapter (PEFT folders), and SGLang's
POST /generate and POST /update_weights_from_disk (a warm-started base from the trainer), with
GET /model_info. Models: each base model under its id in the config, and each policy under its
id (a run's trained adapters at the checkpoint; for a config, the policies untrained).
A run's rollout backend can point at it (rollout.backend, docs/inference-engines.md).

Clients send "Authorization: Bearer <key>". The key is read from the environment variable
--api-key-env names, or else made fresh and written to --api-key-file (readable only by you).

options:
  --checkpoint C      initial | latest (default) | best | <step> of a run folder
  --host HOST         interface to listen on (default 127.0.0.1; anything else is reachable
                      from other machines and is warned about)
  --port N            port (default 8000; 0: a free one, printed)
  --api-key-env NAME  take the API key from this environment variable
  --api-key-file F    where a fresh key is written (default .troupe/openai.token)
  --max-body-mib N    largest request body accepted (default ${DEFAULT_MAX_BODY_BYTES / 1024 / 1024})
  -h, --help          this text
`;

async function teamOf(target: string, checkpoint: string | undefined): Promise<{ exp: ResolvedExperiment; bases: Map<string, Map<string, Float32Array>>; ckDir: string | null }> {
  const configFile = target.endsWith('.json') && (await stat(target).then((s) => s.isFile(), () => false));
  if (configFile) {
    if (checkpoint !== undefined) throw new UsageError('--checkpoint applies to a run folder; an experiment config is served untrained', usage);
    const { experiment: exp } = await loadExperiment(target);
    const bases = new Map<string, Map<string, Float32Array>>();
    for (const [id, m] of exp.models) bases.set(id, await sourceWeights(m));
    return { exp, bases, ckDir: null };
  }
  const choice = parseCheckpointChoice(checkpoint ?? 'latest');
  if (!choice) throw new UsageError(`--checkpoint must be ${checkpointChoiceHelp}, got '${checkpoint}'`, usage);
  const run = await openRunCheckpoint(target, choice);
  return { exp: run.experiment, bases: run.bases, ckDir: run.checkpoint.dir };
}

export const serveOpenAiCommand: Command = {
  synopsis: [`serve-openai <run folder | experiment config.json> [--checkpoint C] [--host H] [--port N] [--api-key-env NAME]`],
  summary: "serve a run's team over an OpenAI-compatible HTTP API (vLLM's routes)",
  usage,
  async run(args) {
    const { values, positionals } = parseCommandLine(usage, {
      args: [...args],
      options: {
        checkpoint: { type: 'string' },
        host: { type: 'string', default: '127.0.0.1' },
        port: { type: 'string', default: '8000' },
        'api-key-env': { type: 'string' },
        'api-key-file': { type: 'string', default: '.troupe/openai.token' },
        'max-body-mib': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
      allowPositionals: true,
      strict: true,
    });
    if (values.help) return printUsage(usage);
    expectPositionals(positionals, ['<run folder | experiment config.json>'], usage);
    const port = integerFlag('port', values.port, 0, usage);
    const maxBodyBytes = values['max-body-mib'] === undefined ? DEFAULT_MAX_BODY_BYTES : integerFlag('max-body-mib', values['max-body-mib'], 1, usage) * 1024 * 1024;
    const log = (line: string) => process.stderr.write(`${new Date().toISOString()} ${line}\n`);
    let token: string;
    let keyFile: string | null = null;
    if (values['api-key-env'] !== undefined) {
      const v = process.env[values['api-key-env']];
      if (!v || !/^\S+$/.test(v)) throw new Error(`--api-key-env: the environment variable ${values['api-key-env']} is unset, empty or has spaces`);
      token = v;
    } else {
      token = randomBytes(32).toString('base64url');
      keyFile = resolve(values['api-key-file']);
      await mkdir(dirname(keyFile), { recursive: true });
      // Removed first: `mode` applies only when the file is created.
      await rm(keyFile, { force: true });
      await writeFile(keyFile, `${token}\n`, { mode: 0o600, flag: 'wx' });
    }
    const { exp, bases, ckDir } = await teamOf(positionals[0]!, values.checkpoint);
    const engine = await Engine.start({ executionProvider: exp.engine.executionProvider, ...(exp.engine.threads ? { threads: exp.engine.threads } : {}), log });
    let models: ServedModels;
    let server: OpenAiServer;
    try {
      models = await servedTeam(engine, exp, bases, ckDir);
      if (values.host !== '127.0.0.1' && values.host !== 'localhost' && values.host !== '::1') log(`listening on ${values.host}: reachable from other machines (the API key still applies)`);
      server = await OpenAiServer.start({ models, token, host: values.host, port, maxBodyBytes, log });
    } catch (e) {
      await engine.close();
      throw e;
    }
    // The URL on stdout, alone on its line: what a script starting the server waits for.
    process.stdout.write(`troupe openai endpoint listening on ${server.url}\n${keyFile ? `api key file: ${displayPath(keyFile)}\n` : ''}models: ${models.list().map((m) => m.id).join(', ')}\n`);
    return new Promise<number>((done) => {
      const onSignal = () => {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
        void (async () => {
          await server.close();
          await models.close();
          await engine.close();
          if (keyFile) await rm(keyFile, { force: true });
          done(0);
        })();
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
    });
  },
};
