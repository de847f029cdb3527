/**
 * Peak memory of one rebuild of the quantized rollout decoder (`rollout-decoder.ts`) at
 * Qwen2.5-0.5B's shapes (random weights; 494M parameters, 1.98 GB in float32), the rebuild a
 * trainer pays after every update.
 *
 * The weights (and, by default, a rank-8 LoRA adapter on every projection with a non-zero B, as
 * a LoRA trainer holds it) are uploaded into an engine and the main thread's copies dropped; the
 * int4 decoder (blocks of 128) is built once, the weights marked changed, and the peak-RSS
 * high-water mark reset (Linux: /proc/self/clear_refs) before the rebuild is timed. Printed and
 * written: RSS before the rebuild (the engine's residents and the first session), the rebuild's
 * peak (VmHWM: main thread and engine worker together, one process) and its growth over the
 * start, and the RSS after. Only the decoder's own work is measured: no generation runs.
 *
 *   nice -n 19 node --import tsx bench/engine/rollout-rebuild-memory.ts
 *
 * Options (env): REBUILD_WEIGHTS (int4 | int8; int4), REBUILD_LORA (1 | 0; 1), REBUILD_OUT (a JSON
 * file to write; none), REBUILD_LABEL (what the JSON calls this code; "current").
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { RolloutWeights } from '../../server/models/decode-graph.ts';
import { initParameters } from '../../server/models/init.ts';
import { parameterShapes } from '../../server/models/model-config.ts';
import { RolloutDecoder, type DecoderSource } from '../../server/models/rollout-decoder.ts';
import { loraShapes, type LoraSpec } from '../../server/models/transformer-graph.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { qwen25HalfB } from './bench-real-vocab.ts';

const weights = (process.env['REBUILD_WEIGHTS'] ?? 'int4') as RolloutWeights;
if (weights !== 'int4' && weights !== 'int8') throw new Error(`REBUILD_WEIGHTS must be int4 or int8, got '${weights}'`);
const withLora = (process.env['REBUILD_LORA'] ?? '1') !== '0';
const label = process.env['REBUILD_LABEL'] ?? 'current';
const blockSize = 128;
const c = qwen25HalfB;
const lora: LoraSpec | null = withLora ? { rank: 8, alpha: 16, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] } : null;

/** A memory line of /proc/self/status in MiB (Linux only: this benchmark needs the high-water mark reset). */
function statusMiB(field: 'VmHWM' | 'VmRSS'): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(readFileSync('/proc/self/status', 'utf8'));
  if (!m) throw new Error(`/proc/self/status has no ${field} line`);
  return Number(m[1]) / 1024;
}

function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  const gc: unknown = runInNewContext('gc');
  if (typeof gc === 'function') gc();
}

const engine = await Engine.start({ log: () => {} });
try {
  const resident = (name: string) => `w:${name}`;
  // Upload transfers each buffer to the worker, so the main thread keeps no copy of the weights.
  for (const [name, t] of initParameters(c, 1)) await engine.upload(resident(name), { dtype: 'float32', dims: parameterShapes(c).find(([n]) => n === name)![1], data: t });
  if (lora) {
    for (const [name, shape] of loraShapes(c, lora)) {
      const n = shape.reduce((a, b) => a * b, 1);
      // Non-zero A and B, so merging does the work it does after training.
      const data = Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + name.length) * 0.01);
      await engine.upload(resident(name), { dtype: 'float32', dims: shape, data });
    }
  }
  const download = async (names: readonly (readonly [string, unknown])[]) => {
    const out = new Map<string, Float32Array>();
    for (const [name] of names) out.set(name, (await engine.download(resident(name))).data as Float32Array);
    return out;
  };
  // What a Policy hands its decoder (policy.ts), over these residents.
  const src: DecoderSource = {
    engine,
    id: 'rebuild-bench',
    config: c,
    lora,
    resident,
    snapshot: async () => ({ weights: await download(parameterShapes(c)), adapter: lora ? await download(loraShapes(c, lora)) : null }),
  };
  const decoder = new RolloutDecoder(src, { weights, fusedDecode: true, blockSize, spinning: false });
  await decoder.choose(true);
  const firstMs = decoder.lastRebuildMs;
  decoder.invalidate();
  collectGarbage();
  const startMiB = statusMiB('VmRSS');
  writeFileSync('/proc/self/clear_refs', '5');
  await decoder.choose(true);
  const peakMiB = statusMiB('VmHWM');
  collectGarbage();
  const afterMiB = statusMiB('VmRSS');
  const row = {
    label,
    weights,
    blockSize,
    lora: lora ? `rank ${lora.rank}, ${lora.targets.join('/')}` : 'none',
    model: 'qwen2.5-0.5b shapes (random weights)',
    rssBeforeRebuildMiB: Math.round(startMiB),
    rebuildPeakMiB: Math.round(peakMiB),
    rebuildGrowthMiB: Math.round(peakMiB - startMiB),
    rssAfterRebuildMiB: Math.round(afterMiB),
    rebuildMs: Math.round(decoder.lastRebuildMs),
    firstBuildMs: Math.round(firstMs),
  };
  console.log(JSON.stringify(row));
  const out = process.env['REBUILD_OUT'];
  if (out) writeFileSync(out, `${JSON.stringify(row, null, 2)}\n`);
} finally {
  await engine.close();
}
