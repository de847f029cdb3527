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
import { modelDims, projectionName, projectionSize, type LoraTarget, type ModelConfig } from './model-config.ts';
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

/*
 * LoRA adapters for GPT-2 in PEFT's layout. PEFT wraps GPT-2's Conv1D modules as they are:
 *
 *   ours (per layer i)                 PEFT key base_model.model.transformer.h.{i}.<module>.lora_{A,B}.weight
 *   attn.q, attn.k, attn.v             attn.c_attn: ONE adapter, A [R, C], B [3W, R] (rows q | k | v)
 *   attn.o                             attn.c_proj  A [r, W], B [C, r]
 *   mlp.up                             mlp.c_fc     A [r, C], B [F, r]
 *   mlp.down                           mlp.c_proj   A [r, F], B [C, r]
 *
 * PEFT's lora_A / lora_B are nn.Linear whatever the base layer, so A is [r, in] and B [out, r] as
 * ours; `fan_in_fan_out: true` only tells it to transpose B·A when merging into the Conv1D's
 * [in, out] weight. Our q, k and v adapters (m of them, rank r each) become one c_attn adapter of
 * rank R = m·r: A stacks the A's, B is block-diagonal (q's B in q's rows and q's columns, …, zero
 * elsewhere), so B·A is exactly the stacked deltas; its alpha is m·alpha, keeping the scale
 * alpha / r (`rank_pattern` / `alpha_pattern` {"c_attn": …}, PEFT's per-module overrides).
 * target_modules name "c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj": PEFT matches them as key
 * suffixes, so "attn.c_proj" leaves the MLP's c_proj alone.
 *
 * Reading back: a c_attn adapter whose safetensors metadata names its segments
 * (`troupe.c_attn_segments`, written by the export) and whose B is zero off the blocks splits into
 * the rank-r q, k, v adapters it came from. Any other c_attn adapter (trained by PEFT) of rank R
 * becomes q, k and v adapters of rank R that share A, with B's q, k, v rows: still exactly PEFT's
 * delta. When modules end up with different ranks or scales, every adapter is padded with zeros
 * to the largest rank and its scale folded into B (alpha = rank), which changes no product.
 */

/** The PEFT module of each GPT-2 LoRA target. */
const gpt2PeftModules: Readonly<Partial<Record<LoraTarget, string>>> = { q: 'attn.c_attn', k: 'attn.c_attn', v: 'attn.c_attn', o: 'attn.c_proj', up: 'mlp.c_fc', down: 'mlp.c_proj' };
const qkvTargets = ['q', 'k', 'v'] as const;
/** Safetensors metadata key: the c_attn adapter's segments in order ("q,v"). */
export const GPT2_PEFT_SEGMENTS_KEY = 'troupe.c_attn_segments';
export const gpt2PeftKey = (layer: number, module: string, which: 'A' | 'B'): string => `base_model.model.${GPT2_PREFIX}h.${layer}.${module}.lora_${which}.weight`;
const gpt2PeftKeyPattern = new RegExp(`^base_model\\.model\\.transformer\\.h\\.${I}\\.(attn\\.c_attn|attn\\.c_proj|mlp\\.c_fc|mlp\\.c_proj)\\.lora_(A|B)\\.weight$`);

export interface Gpt2PeftExport {
  readonly tensors: Map<string, SafetensorsInput>;
  readonly metadata: Record<string, string>;
  /** adapter_config.json fields that differ from the Llama form. */
  readonly config: { target_modules: string[]; fan_in_fan_out: true; rank_pattern: Record<string, number>; alpha_pattern: Record<string, number> };
}

/** Our GPT-2 adapter (`params`: our names, `targets` in canonical order) as PEFT tensors and config fields. */
export function gpt2PeftExport(c: ModelConfig, lora: { rank: number; alpha: number; targets: readonly LoraTarget[] }, params: ReadonlyMap<string, SafetensorsInput>): Gpt2PeftExport {
  const { C, L } = modelDims(c);
  const r = lora.rank;
  const W = projectionSize(c, 'q').out;
  const qkv = qkvTargets.filter((t) => lora.targets.includes(t));
  const m = qkv.length;
  const tensors = new Map<string, SafetensorsInput>();
  const get = (n: string): Float32Array => {
    const t = params.get(n);
    if (!t) throw new Error(`GPT-2 PEFT export: missing adapter tensor '${n}'`);
    return t.data;
  };
  for (let i = 0; i < L; i++) {
    if (m > 0) {
      const A = new Float32Array(m * r * C);
      const B = new Float32Array(3 * W * m * r);
      qkv.forEach((t, j) => {
        A.set(get(`${projectionName(i, t)}.lora_A`), j * r * C);
        const b = get(`${projectionName(i, t)}.lora_B`); // [W, r]
        const seg = qkvTargets.indexOf(t);
        for (let row = 0; row < W; row++) for (let col = 0; col < r; col++) B[(seg * W + row) * m * r + j * r + col] = b[row * r + col]!;
      });
      tensors.set(gpt2PeftKey(i, 'attn.c_attn', 'A'), { shape: [m * r, C], data: A });
      tensors.set(gpt2PeftKey(i, 'attn.c_attn', 'B'), { shape: [3 * W, m * r], data: B });
    }
    for (const t of lora.targets) {
      if (qkvTargets.includes(t as (typeof qkvTargets)[number])) continue;
      const { in: fanIn, out: fanOut } = projectionSize(c, t);
      tensors.set(gpt2PeftKey(i, gpt2PeftModules[t]!, 'A'), { shape: [r, fanIn], data: get(`${projectionName(i, t)}.lora_A`) });
      tensors.set(gpt2PeftKey(i, gpt2PeftModules[t]!, 'B'), { shape: [fanOut, r], data: get(`${projectionName(i, t)}.lora_B`) });
    }
  }
  const modules = [...new Set(lora.targets.map((t) => gpt2PeftModules[t]!))].map((mod) => (mod === 'attn.c_attn' ? 'c_attn' : mod));
  const patterns = m > 1 ? { rank_pattern: { c_attn: m * r }, alpha_pattern: { c_attn: m * lora.alpha } } : { rank_pattern: {}, alpha_pattern: {} };
  return { tensors, metadata: m > 0 ? { [GPT2_PEFT_SEGMENTS_KEY]: qkv.join(',') } : {}, config: { target_modules: modules, fan_in_fan_out: true, ...patterns } };
}

/** PEFT's `get_pattern_key`: the first pattern that matches the module name as a dotted suffix. */
function patternValue(pattern: Readonly<Record<string, unknown>> | null | undefined, module: string): number | undefined {
  for (const [key, value] of Object.entries(pattern ?? {})) {
    let re: RegExp;
    try {
      re = new RegExp(`^(.*\\.)?(${key})$`);
    } catch {
      continue;
    }
    if (re.test(module)) return typeof value === 'number' ? value : undefined;
  }
  return undefined;
}

export interface Gpt2PeftConfig {
  readonly r: number;
  readonly lora_alpha: number;
  readonly rank_pattern?: Readonly<Record<string, unknown>> | null | undefined;
  readonly alpha_pattern?: Readonly<Record<string, unknown>> | null | undefined;
  readonly target_modules?: readonly string[] | string | null | undefined;
}

/**
 * A PEFT GPT-2 adapter's tensors as our adapter (see the comment above `gpt2PeftModules`): rank,
 * alpha, targets and tensors under our names, or the problems that stop it (a tensor that is not
 * a GPT-2 LoRA matrix, a wrong shape, a rank that disagrees with the config, a layer left out).
 */
export function gpt2PeftImport(c: ModelConfig, cfg: Gpt2PeftConfig, tensors: ReadonlyMap<string, SafetensorsTensor>, metadata: Readonly<Record<string, string>>): { rank: number; alpha: number; targets: LoraTarget[]; params: Map<string, SafetensorsTensor>; problems: string[] } {
  const { C, L } = modelDims(c);
  const W = projectionSize(c, 'q').out;
  const problems: string[] = [];
  const dims: Record<string, { in: number; out: number }> = { 'attn.c_attn': { in: C, out: 3 * W }, 'attn.c_proj': projectionSize(c, 'o'), 'mlp.c_fc': projectionSize(c, 'up'), 'mlp.c_proj': projectionSize(c, 'down') };
  const found = new Map<string, { A?: SafetensorsTensor; B?: SafetensorsTensor; key: string }>();
  for (const [key, t] of tensors) {
    const m = gpt2PeftKeyPattern.exec(key);
    if (!m || Number(m[1]) >= L) {
      problems.push(`unexpected tensor '${key}' (shape [${t.shape.join(', ')}]): not a LoRA matrix of a ${L}-layer GPT-2 (c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj)`);
      continue;
    }
    const id = `${m[1]}|${m[2]}`;
    const entry = found.get(id) ?? { key: gpt2PeftKey(Number(m[1]), m[2]!, 'A') };
    entry[m[3] as 'A' | 'B'] = t;
    found.set(id, entry);
  }
  const modules = [...new Set([...found.keys()].map((id) => id.split('|')[1]!))];
  const listed = cfg.target_modules;
  // Each layer's adapters, per target: A [r, in], B [out, r] and the scale alpha / r.
  const perTarget: Array<{ name: string; A: Float32Array; B: Float32Array; r: number; scale: number; fanIn: number; fanOut: number }> = [];
  const segments = metadata[GPT2_PEFT_SEGMENTS_KEY]?.split(',').filter((t): t is (typeof qkvTargets)[number] => (qkvTargets as readonly string[]).includes(t)) ?? null;
  for (const mod of modules) {
    if (Array.isArray(listed) && !listed.some((e) => e === mod || mod.endsWith(`.${e}`) || e === `${GPT2_PREFIX}${mod}`)) problems.push(`target_modules does not list '${mod}' but the adapter has tensors for it`);
    for (let i = 0; i < L; i++) {
      const e = found.get(`${i}|${mod}`);
      const name = `${GPT2_PREFIX}h.${i}.${mod}`;
      if (!e?.A || !e.B) {
        problems.push(`missing tensor '${gpt2PeftKey(i, mod, e?.A ? 'B' : 'A')}': adapters must cover every layer`);
        continue;
      }
      const r = patternValue(cfg.rank_pattern, name) ?? cfg.r;
      const alpha = patternValue(cfg.alpha_pattern, name) ?? cfg.lora_alpha;
      const d = dims[mod]!;
      const shapeOk = (t: SafetensorsTensor, rows: number, cols: number) => t.shape.length === 2 && t.shape[0] === rows && t.shape[1] === cols;
      if (!shapeOk(e.A, r, d.in) || !shapeOk(e.B, d.out, r)) {
        problems.push(`'${gpt2PeftKey(i, mod, 'A')}' / lora_B have shapes [${e.A.shape.join(', ')}] / [${e.B.shape.join(', ')}], expected [${r}, ${d.in}] / [${d.out}, ${r}] (rank ${r} from the config)`);
        continue;
      }
      const scale = alpha / r;
      if (mod !== 'attn.c_attn') {
        const t = (Object.entries(gpt2PeftModules) as Array<[LoraTarget, string]>).find(([, v]) => v === mod)![0];
        perTarget.push({ name: projectionName(i, t), A: e.A.data, B: e.B.data, r, scale, fanIn: d.in, fanOut: d.out });
        continue;
      }
      // Our export's block-diagonal form splits back into rank-r adapters; anything else shares A.
      const m = segments?.length ?? 0;
      const block = m > 0 && r % m === 0 ? r / m : 0;
      const offBlockZero =
        block > 0 &&
        qkvTargets.every((t, seg) => {
          const j = segments!.indexOf(t);
          for (let row = seg * W; row < (seg + 1) * W; row++) for (let col = 0; col < r; col++) if ((j < 0 || col < j * block || col >= (j + 1) * block) && e.B!.data[row * r + col] !== 0) return false;
          return true;
        });
      for (const [seg, t] of qkvTargets.entries()) {
        const j = offBlockZero ? segments!.indexOf(t) : seg;
        if (j < 0) continue;
        const rank = offBlockZero ? block : r;
        const A = offBlockZero ? e.A.data.slice(j * block * C, (j + 1) * block * C) : e.A.data;
        const B = new Float32Array(W * rank);
        for (let row = 0; row < W; row++) for (let col = 0; col < rank; col++) B[row * rank + col] = e.B.data[(seg * W + row) * r + (offBlockZero ? j * block : 0) + col]!;
        perTarget.push({ name: projectionName(i, t), A, B, r: rank, scale, fanIn: C, fanOut: W });
      }
    }
  }
  const params = new Map<string, SafetensorsTensor>();
  const targets = (Object.keys(gpt2PeftModules) as LoraTarget[]).filter((t) => perTarget.some((p) => p.name.endsWith(`.${t}`)));
  if (problems.length > 0 || perTarget.length === 0) return { rank: cfg.r, alpha: cfg.lora_alpha, targets, params, problems };
  const same = perTarget.every((p) => p.r === perTarget[0]!.r && p.scale === perTarget[0]!.scale);
  // One rank and scale for all: as read. Otherwise zero-padded to the largest rank, scales folded into B.
  const R = same ? perTarget[0]!.r : Math.max(...perTarget.map((p) => p.r));
  for (const p of perTarget) {
    const A = new Float32Array(R * p.fanIn);
    A.set(p.A);
    const B = new Float32Array(p.fanOut * R);
    for (let row = 0; row < p.fanOut; row++) for (let col = 0; col < p.r; col++) B[row * R + col] = same ? p.B[row * p.r + col]! : p.B[row * p.r + col]! * p.scale;
    params.set(`${p.name}.lora_A`, { dtype: 'F32', shape: [R, p.fanIn], data: A });
    params.set(`${p.name}.lora_B`, { dtype: 'F32', shape: [p.fanOut, R], data: B });
  }
  return { rank: R, alpha: same ? perTarget[0]!.scale * R : R, targets, params, problems };
}
