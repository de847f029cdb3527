/**
 * `troupe models inspect <folder>`: what a model folder holds (a Troupe checkpoint or a Hugging
 * Face Qwen2/Qwen3/Llama folder) and one greedy generation from it, which proves the weights load
 * and run. Everything but the generation is read from config files and safetensors headers.
 */
import { resolve } from 'node:path';
import { Engine } from '../runtime/engine.ts';
import { loadCheckpoint } from '../models/checkpoint.ts';
import { greedyGenerate } from '../models/greedy-generate.ts';
import { describeModelFolder, type ModelFolderInfo } from '../models/model-folder.ts';
import { modelDims } from '../models/model-config.ts';
import { loadFolderTokenizer } from '../models/folder-tokenizer.ts';
import { expectPositionals, integerFlag, parseCommandLine, printUsage, UsageError, type Command } from './command.ts';
import { displayPath } from './text-format.ts';

const usage = `usage: troupe models inspect <model folder> [--prompt TEXT | --prompt-ids 1,2,3] [--max-new-tokens N] [--no-generate] [--json]

Describes a model folder — a Troupe checkpoint (config.json + model.safetensors) or a Hugging
Face folder (config.json, model.safetensors or a sharded index; model_type qwen2, qwen3 or llama):
architecture, parameters, stored dtypes, tokenizer files, chat template — and generates greedily
from a prompt to show the weights load and run.

options:
  --prompt TEXT        prompt text (needs a tokenizer Troupe can read; default "Hello")
  --prompt-ids IDS     prompt as comma-separated token ids, when no tokenizer is usable
  --max-new-tokens N   tokens to generate (default 16)
  --no-generate        describe only; do not load the weights
  --json               print one JSON object
  -h, --help           this text
`;

/** A prompt as token ids plus a way to show generated ids, or why text cannot be used. */
interface PromptPlan {
  readonly ids: Int32Array;
  readonly shown: string;
  readonly stopTokens: readonly number[];
  readonly decode: ((ids: Int32Array) => string) | null;
}

async function planPrompt(info: ModelFolderInfo, prompt: string | undefined, promptIds: string | undefined): Promise<PromptPlan> {
  if (promptIds !== undefined) {
    const ids = promptIds.split(',').map((s) => Number(s.trim()));
    const bad = ids.findIndex((id) => !Number.isInteger(id) || id < 0 || id >= info.config.vocabSize);
    if (ids.length === 0 || bad >= 0) throw new UsageError(`--prompt-ids: '${promptIds.split(',')[bad] ?? promptIds}' is not a token id below the vocabulary size ${info.config.vocabSize}`, usage);
    return { ids: Int32Array.from(ids), shown: `ids [${ids.join(', ')}]`, stopTokens: info.eosTokenIds, decode: null };
  }
  // Troupe's character tokenizer or the folder's Hugging Face tokenizer (chat template when it has one).
  const found = await loadFolderTokenizer(info.dir);
  if (found !== null) {
    const tok = found.tokenizer;
    const text = prompt ?? 'Hello';
    const ids = found.kind === 'hugging-face' && found.tokenizer.chatTemplate === null ? found.tokenizer.encode(text, { addSpecialTokens: true }) : tok.encodePrompt([{ role: 'user', text }]);
    return { ids, shown: JSON.stringify(text), stopTokens: [...new Set([...tok.stopTokenIds, ...info.eosTokenIds])], decode: (ids) => tok.decode(ids, { specials: 'skip' }) };
  }
  if (prompt !== undefined) {
    throw new Error(`${displayPath(info.dir)}: no tokenizer in this folder (files: ${info.tokenizerFiles.join(', ') || 'none'}); give the prompt as --prompt-ids`);
  }
  // No tokenizer: start from the BOS id (or 0) so the generation still exercises the weights.
  const start = info.bosTokenId ?? 0;
  return { ids: Int32Array.from([start]), shown: `ids [${start}] (no usable tokenizer)`, stopTokens: info.eosTokenIds, decode: null };
}

const fmtCount = (n: number): string =>
  `${n.toLocaleString('en-US')}${n >= 1e9 ? ` (${(n / 1e9).toFixed(2)}B)` : n >= 1e6 ? ` (${(n / 1e6).toFixed(1)}M)` : ''}`;
const fmtBytes = (n: number): string => (n >= 1e9 ? `${(n / 1e9).toFixed(2)} GB` : n >= 1e6 ? `${(n / 1e6).toFixed(1)} MB` : `${(n / 1e3).toFixed(1)} kB`);

function describeShape(info: ModelFolderInfo): string {
  const c = info.config;
  const { H, Hkv, D } = modelDims(c);
  if (c.architecture === 'gpt2') {
    return [
      `${c.numLayers} layers`, `hidden ${c.hiddenSize}`, `${H} heads (head dim ${D})`, `MLP ${c.intermediateSize} (GELU tanh)`,
      `vocab ${c.vocabSize}`, c.tieEmbeddings ? 'tied embeddings' : 'separate lm_head', 'LayerNorm',
      `learned positions ${c.positionEmbeddings}`, `context ${c.maxSequenceLength}`,
    ].join(', ');
  }
  const parts = [
    `${c.numLayers} layers`, `hidden ${c.hiddenSize}`, `${H} heads (${Hkv} kv, head dim ${D})`, `MLP ${c.intermediateSize}`,
    `vocab ${c.vocabSize}`, c.tieEmbeddings ? 'tied embeddings' : 'separate lm_head', ...(c.attentionBias ? ['q/k/v bias'] : []),
    ...(c.qkNorm ? ['q/k norm'] : []), `RoPE θ ${c.ropeTheta}`,
    ...(c.ropeScaling ? [`llama3 scaling ×${c.ropeScaling.factor} (from ${c.ropeScaling.originalMaxPositionEmbeddings})`] : []),
    `context ${c.maxSequenceLength}`,
  ];
  return parts.join(', ');
}

export const modelsCommand: Command = {
  synopsis: ['models inspect <model folder> [--prompt TEXT | --prompt-ids IDS] [--max-new-tokens N] [--no-generate] [--json]'],
  summary: 'describe a Troupe or Hugging Face model folder and generate from it',
  usage,
  async run(args) {
    const { values, positionals } = parseCommandLine(usage, {
      args: [...args],
      options: {
        prompt: { type: 'string' },
        'prompt-ids': { type: 'string' },
        'max-new-tokens': { type: 'string', default: '16' },
        'no-generate': { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
      allowPositionals: true,
      strict: true,
    });
    if (values.help) return printUsage(usage);
    if (positionals[0] !== 'inspect') throw new UsageError(positionals.length === 0 ? 'missing subcommand (inspect)' : `unknown subcommand '${positionals[0]}' (inspect)`, usage);
    expectPositionals(positionals.slice(1), ['<model folder>'], usage);
    if (values.prompt !== undefined && values['prompt-ids'] !== undefined) throw new UsageError('give --prompt or --prompt-ids, not both', usage);
    const maxNewTokens = integerFlag('max-new-tokens', values['max-new-tokens'], 1, usage);

    const info = await describeModelFolder(resolve(positionals[1]!));
    let generation: { prompt: string; promptIds: number[]; tokens: number[]; text: string | null; finish: string; tokensPerSecond: number } | null = null;
    if (!values['no-generate']) {
      const plan = await planPrompt(info, values.prompt, values['prompt-ids']);
      // Size the KV cache for this one generation, not for the model's full context.
      const ck = await loadCheckpoint(info.dir);
      const config = { ...ck.config, maxSequenceLength: plan.ids.length + maxNewTokens };
      const engine = await Engine.start({ log: (l) => process.stderr.write(`${l}\n`) });
      try {
        const g = await greedyGenerate(engine, config, ck.params, plan.ids, { maxNewTokens, stopTokens: plan.stopTokens, id: 'inspect' });
        generation = {
          prompt: plan.shown,
          promptIds: [...plan.ids],
          tokens: [...g.tokens],
          text: plan.decode ? plan.decode(g.tokens) : null,
          finish: g.finish,
          tokensPerSecond: g.tokens.length / Math.max(1e-9, g.decodeMs / 1000),
        };
      } finally {
        await engine.close();
      }
    }

    if (values.json) {
      process.stdout.write(`${JSON.stringify({ ...info, generation })}\n`);
      return 0;
    }
    const dtypes = Object.entries(info.storedDtypes).map(([d, n]) => `${d} ${fmtCount(n)}`).join(', ');
    const lines = [
      `folder        ${displayPath(info.dir)}`,
      `format        ${info.format === 'hugging-face' ? `Hugging Face, model_type ${info.modelType}${info.architecture ? ` (${info.architecture})` : ''}${info.nameOrPath ? `, from ${info.nameOrPath}` : ''}` : 'Troupe checkpoint'}`,
      `architecture  ${describeShape(info)}`,
      `parameters    ${fmtCount(info.parameters)}`,
      `weights       ${info.weightFiles.map((w) => `${w.file} (${fmtBytes(w.bytes)})`).join(', ')}; stored as ${dtypes}, loaded as float32`,
      `tokenizer     ${info.tokenizerFiles.join(', ') || 'none'}${info.eosTokenIds.length ? `; eos ids ${info.eosTokenIds.join(', ')}` : ''}`,
      `chat template ${info.chatTemplate ? 'yes' : 'no'}`,
    ];
    if (generation) {
      const out = generation.text !== null ? JSON.stringify(generation.text) : `ids [${generation.tokens.join(', ')}]`;
      lines.push(`generation    ${generation.prompt} → ${out} (${generation.tokens.length} tokens, ${generation.finish}, ${generation.tokensPerSecond.toFixed(1)} tok/s greedy)`);
    }
    process.stdout.write(`${lines.join('\n')}\n`);
    return 0;
  },
};
