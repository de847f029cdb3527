/**
 * GPT-2's Hugging Face tensors (transformers `GPT2LMHeadModel`, e.g. microsoft/DialoGPT-medium)
 * to and from our parameter table (`model-config.ts`, architecture gpt2). Unlike Qwen2/Llama
 * (`hf-names.ts`), the names are not a renaming: GPT-2's projections are `Conv1D` modules whose
 * weight is stored [in, out] (transposed against torch.nn.Linear), and q, k and v are one fused
 * `c_attn` [C, 3C] whose columns are q | k | v.
 *
 *   ours                               Hugging Face (optionally under `transformer.`)
 *   embed.weight           [V, C]      wte.weight              [V, C]
 *   pos_embed.weight       [N, C]      wpe.weight              [N, C]
 *   layers.{i}.attn_norm.{w,b}         h.{i}.ln_1.{weight,bias}
 *   layers.{i}.attn.{q,k,v}.weight     h.{i}.attn.c_attn.weight [C, 3C]: columns split, transposed
 *   layers.{i}.attn.{q,k,v}.bias       h.{i}.attn.c_attn.bias   [3C]: split
 *   layers.{i}.attn.o.{w,b}            h.{i}.attn.c_proj.{weight (transposed), bias}
 *   layers.{i}.mlp_norm.{w,b}          h.{i}.ln_2.{weight,bias}
 *   layers.{i}.mlp.up.{w,b}            h.{i}.mlp.c_fc.{weight (transposed), bias}
 *   layers.{i}.mlp.down.{w,b}          h.{i}.mlp.c_proj.{weight (transposed), bias}
 *   norm.{w,b}                         ln_f.{weight,bias}
 *   lm_head.weight                     lm_head.weight (tied to wte unless tie_word_embeddings is false)
 * Shape legend: V vocab, C width, N learned positions, F MLP width.
 */
import { modelDims, type ModelConfig } from './model-config.ts';
import type { SafetensorsInput, SafetensorsTensor } from './safetensors.ts';

/** The prefix `GPT2LMHeadModel.save_pretrained` writes (`GPT2Model` alone writes none). */
export const GPT2_PREFIX = 'transformer.';

/** Causal-mask buffers older GPT-2 checkpoints carry (`attn.bias` [1,1,N,N], `attn.masked_bias`): not weights. */
const maskBuffer = /^h\.(0|[1-9][0-9]*)\.attn\.(bias|masked_bias)$/;

const I = '(0|[1-9][0-9]*)';
/** Tensors that only change name (norms, embeddings, biases of unfused projections). */
const renames: ReadonlyArray<[hf: RegExp, ours: string]> = [
  [/^wte\.weight$/, 'embed.weight'],
  [/^wpe\.weight$/, 'pos_embed.weight'],
  [new RegExp(`^h\\.${I}\\.ln_1\\.(weight|bias)$`), 'layers.$1.attn_norm.$2'],
  [new RegExp(`^h\\.${I}\\.ln_2\\.(weight|bias)$`), 'layers.$1.mlp_norm.$2'],
  [new RegExp(`^h\\.${I}\\.attn\\.c_proj\\.bias$`), 'layers.$1.attn.o.bias'],
  [new RegExp(`^h\\.${I}\\.mlp\\.c_fc\\.bias$`), 'layers.$1.mlp.up.bias'],
  [new RegExp(`^h\\.${I}\\.mlp\\.c_proj\\.bias$`), 'layers.$1.mlp.down.bias'],
  [/^ln_f\.(weight|bias)$/, 'norm.$1'],
  [/^lm_head\.weight$/, 'lm_head.weight'],
];
/** Conv1D weights [in, out]: ours is the transpose. */
const conv1d: ReadonlyArray<[hf: RegExp, ours: string]> = [
  [new RegExp(`^h\\.${I}\\.attn\\.c_proj\\.weight$`), 'layers.$1.attn.o.weight'],
  [new RegExp(`^h\\.${I}\\.mlp\\.c_fc\\.weight$`), 'layers.$1.mlp.up.weight'],
  [new RegExp(`^h\\.${I}\\.mlp\\.c_proj\\.weight$`), 'layers.$1.mlp.down.weight'],
];
const cAttn = new RegExp(`^h\\.${I}\\.attn\\.c_attn\\.(weight|bias)$`);

/** A row-major [rows, cols] matrix transposed to [cols, rows]. */
function transpose(data: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = data[r * cols + c]!;
  return out;
}

/** Columns [start, start + n) of a row-major [rows, cols] matrix, transposed: [n, rows]. */
function columnsTransposed(data: Float32Array, rows: number, cols: number, start: number, n: number): Float32Array {
  const out = new Float32Array(n * rows);
  for (let r = 0; r < rows; r++) for (let c = 0; c < n; c++) out[c * rows + r] = data[r * cols + start + c]!;
  return out;
}

const fmt = (s: readonly number[]): string => `[${s.join(', ')}]`;

/** The GPT-2 tensor name without the `transformer.` prefix. */
export const stripGpt2Prefix = (hfName: string): string => (hfName.startsWith(GPT2_PREFIX) ? hfName.slice(GPT2_PREFIX.length) : hfName);

/** Whether a GPT-2 tensor is a causal-mask buffer rather than a weight (skipped on load). */
export const isGpt2Buffer = (hfName: string): boolean => maskBuffer.test(stripGpt2Prefix(hfName));

/**
 * Our parameters from a GPT-2 checkpoint's tensors (buffers and a tied lm_head already removed by
 * the caller): Conv1D weights transposed, c_attn split into q, k, v. Returns the mapped tensors
 * (still to be checked against `parameterShapes` by the caller) and a problem per tensor that is
 * not part of the model or whose fused shape cannot be split.
 */
export function gpt2TensorsToOurs(c: ModelConfig, tensors: ReadonlyMap<string, SafetensorsTensor>): { mapped: Map<string, SafetensorsTensor>; problems: string[] } {
  const { C, H, D } = modelDims(c);
  const mapped = new Map<string, SafetensorsTensor>();
  const problems: string[] = [];
  for (const [hfName, t] of tensors) {
    const name = stripGpt2Prefix(hfName);
    const rename = renames.find(([re]) => re.test(name));
    if (rename) {
      mapped.set(name.replace(rename[0], rename[1]), t);
      continue;
    }
    const conv = conv1d.find(([re]) => re.test(name));
    if (conv) {
      const [rows, cols] = t.shape as [number, number];
      // A wrong rank stays untransposed, so the shape check names it.
      mapped.set(name.replace(conv[0], conv[1]), t.shape.length === 2 ? { ...t, shape: [cols, rows], data: transpose(t.data, rows, cols) } : t);
      continue;
    }
    const fused = cAttn.exec(name);
    if (fused) {
      const [, layer, kind] = fused;
      const width = H * D;
      const ok = kind === 'weight' ? t.shape.length === 2 && t.shape[0] === C && t.shape[1] === 3 * width : t.shape.length === 1 && t.shape[0] === 3 * width;
      if (!ok) {
        problems.push(`tensor '${hfName}' has shape ${fmt(t.shape)}, expected ${kind === 'weight' ? fmt([C, 3 * width]) : fmt([3 * width])} (q | k | v of width ${width})`);
        continue;
      }
      (['q', 'k', 'v'] as const).forEach((p, j) => {
        const ours = `layers.${layer}.attn.${p}.${kind}`;
        if (kind === 'weight') mapped.set(ours, { ...t, shape: [width, C], data: columnsTransposed(t.data, C, 3 * width, j * width, width) });
        else mapped.set(ours, { ...t, shape: [width], data: t.data.slice(j * width, (j + 1) * width) });
      });
      continue;
    }
    problems.push(`unexpected tensor '${hfName}' (shape ${fmt(t.shape)}): not part of a gpt2 model`);
  }
  return { mapped, problems };
}

/** How one of our GPT-2 parameters is named in the checkpoint, for error messages. */
export function gpt2SourceName(ours: string): string {
  const m = /^layers\.(\d+)\.attn\.(q|k|v)\.(weight|bias)$/.exec(ours);
  if (m) return `${GPT2_PREFIX}h.${m[1]}.attn.c_attn.${m[3]}' (its ${m[2]} part; ours: '${ours}'`;
  const back: ReadonlyArray<[RegExp, string]> = [
    [/^embed\.weight$/, 'wte.weight'], [/^pos_embed\.weight$/, 'wpe.weight'],
    [/^layers\.(\d+)\.attn_norm\.(weight|bias)$/, 'h.$1.ln_1.$2'], [/^layers\.(\d+)\.mlp_norm\.(weight|bias)$/, 'h.$1.ln_2.$2'],
    [/^layers\.(\d+)\.attn\.o\.(weight|bias)$/, 'h.$1.attn.c_proj.$2'], [/^layers\.(\d+)\.mlp\.up\.(weight|bias)$/, 'h.$1.mlp.c_fc.$2'],
    [/^layers\.(\d+)\.mlp\.down\.(weight|bias)$/, 'h.$1.mlp.c_proj.$2'], [/^norm\.(weight|bias)$/, 'ln_f.$1'],
  ];
  const hit = back.find(([re]) => re.test(ours));
  if (ours === 'lm_head.weight') return `lm_head.weight' (ours: '${ours}'`;
  const transposed = /\.(o|up|down)\.weight$/.test(ours) ? ', transposed' : '';
  return hit ? `${GPT2_PREFIX}${ours.replace(hit[0], hit[1])}' (ours: '${ours}'${transposed}` : `${ours}' (no GPT-2 counterpart`;
}

/**
 * Our GPT-2 parameters as the tensors `GPT2LMHeadModel.save_pretrained` writes: Conv1D weights
 * [in, out], q | k | v fused into c_attn, names under `transformer.`. The inverse of
 * `gpt2TensorsToOurs`.
 */
export function oursToGpt2Tensors(c: ModelConfig, params: ReadonlyMap<string, SafetensorsInput>): Map<string, SafetensorsInput> {
  const { C, H, D, L } = modelDims(c);
  const width = H * D;
  const get = (n: string): SafetensorsInput => {
    const t = params.get(n);
    if (!t) throw new Error(`GPT-2 checkpoint: missing parameter '${n}'`);
    return t;
  };
  const data = (n: string): Float32Array => get(n).data;
  const out = new Map<string, SafetensorsInput>();
  const put = (name: string, shape: readonly number[], d: Float32Array) => out.set(`${GPT2_PREFIX}${name}`, { shape, data: d });
  put('wte.weight', get('embed.weight').shape, data('embed.weight'));
  put('wpe.weight', get('pos_embed.weight').shape, data('pos_embed.weight'));
  for (let i = 0; i < L; i++) {
    const p = `layers.${i}`;
    for (const [ours, hf] of [['attn_norm', 'ln_1'], ['mlp_norm', 'ln_2']] as const) {
      put(`h.${i}.${hf}.weight`, [C], data(`${p}.${ours}.weight`));
      put(`h.${i}.${hf}.bias`, [C], data(`${p}.${ours}.bias`));
    }
    const fusedW = new Float32Array(C * 3 * width);
    const fusedB = new Float32Array(3 * width);
    (['q', 'k', 'v'] as const).forEach((t, j) => {
      const w = data(`${p}.attn.${t}.weight`); // [width, C]
      for (let r = 0; r < width; r++) for (let col = 0; col < C; col++) fusedW[col * 3 * width + j * width + r] = w[r * C + col]!;
      fusedB.set(data(`${p}.attn.${t}.bias`), j * width);
    });
    put(`h.${i}.attn.c_attn.weight`, [C, 3 * width], fusedW);
    put(`h.${i}.attn.c_attn.bias`, [3 * width], fusedB);
    for (const [ours, hf] of [['attn.o', 'attn.c_proj'], ['mlp.up', 'mlp.c_fc'], ['mlp.down', 'mlp.c_proj']] as const) {
      const [rows, cols] = get(`${p}.${ours}.weight`).shape as [number, number];
      put(`h.${i}.${hf}.weight`, [cols, rows], transpose(data(`${p}.${ours}.weight`), rows, cols));
      put(`h.${i}.${hf}.bias`, [rows], data(`${p}.${ours}.bias`));
    }
  }
  put('ln_f.weight', [C], data('norm.weight'));
  put('ln_f.bias', [C], data('norm.bias'));
  if (!c.tieEmbeddings) out.set('lm_head.weight', { shape: get('lm_head.weight').shape, data: data('lm_head.weight') });
  return out;
}
