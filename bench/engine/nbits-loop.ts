/**
 * `node --import tsx bench/engine/nbits-loop.ts` — one chain of 8 projections ([M,K] ↔ [K,N], weights
 * baked) run in a loop, for a sampling profiler to look at the kernel ONNX Runtime runs: MatMulNBits
 * (NB_BITS 8 or 4, NB_BLOCK 32, NB_ACC accuracy level 4) or, with NB_BITS=32, a plain fp32 MatMul.
 * Prints READY on stderr when the loop starts, then µs per projection at the end. Used with
 * `vnni_share.py` (docs/performance.md, "Per-kernel profiles, both sides": int8 on this CPU).
 * Options (env): NB_M (64), NB_K (896), NB_N (4864), NB_THREADS (1), NB_SECONDS (10).
 */
import { Graph, type Node } from '../../server/compiler/ir.ts';
import { emitOnnx } from '../../server/compiler/onnx-emit.ts';
import { quantizeBlockwise, type QuantBits } from '../../server/models/quantize.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { f32 } from '../../server/runtime/tensor.ts';

const e = process.env;
const bits = Number(e['NB_BITS'] ?? 8);
const acc = Number(e['NB_ACC'] ?? 4);
const [M, K, N, block] = [Number(e['NB_M'] ?? 64), Number(e['NB_K'] ?? 896), Number(e['NB_N'] ?? 4864), Number(e['NB_BLOCK'] ?? 32)];
if (![4, 8, 32].includes(bits)) throw new Error(`NB_BITS must be 4, 8 or 32 (fp32), not ${bits}`);
const g = new Graph();
const inits = new Map<string, Uint8Array>();
let x: Node = g.input('x', 'float32', [M, K]);
for (let r = 0; r < 8; r++) {
  const [rows, cols] = r % 2 ? [K, N] : [N, K];
  const w = Float32Array.from({ length: rows * cols }, (_, i) => Math.sin(i * 0.37 + r) * 0.05);
  if (bits === 32) {
    inits.set(`w${r}`, new Uint8Array(w.buffer));
    x = g.matmul(x, g.transpose(g.input(`w${r}`, 'float32', [rows, cols]), [1, 0]));
    continue;
  }
  const q = quantizeBlockwise(w, rows, cols, bits as QuantBits, block);
  const blocks = Math.ceil(cols / q.blockSize);
  inits.set(`w${r}.packed`, q.packed).set(`w${r}.scales`, new Uint8Array(q.scales.buffer));
  x = g.matMulNBits(x, g.input(`w${r}.packed`, 'uint8', [rows, blocks, (q.blockSize * bits) / 8]), g.input(`w${r}.scales`, 'float32', [rows * blocks]), bits as QuantBits, block, acc);
}
const engine = await Engine.start({ threads: Number(e['NB_THREADS'] ?? 1), log: () => {} });
await engine.createSession('s', emitOnnx([['y', x]], { name: 'nbits-loop', initializers: inits }));
await engine.upload('s:x', f32([M, K], Float32Array.from({ length: M * K }, (_, i) => Math.cos(i))));
const call = () => engine.run('s', { x: { resident: 's:x' } }, { y: { into: 's:y', dtype: 'float32', dims: [M, K] } });
for (let i = 0; i < 3; i++) await call();
console.error('READY');
const t0 = performance.now();
let n = 0;
while (performance.now() - t0 < Number(e['NB_SECONDS'] ?? 10) * 1000) {
  await call();
  n++;
}
console.log(`bits ${bits} accuracy ${acc} M ${M}: ${(((performance.now() - t0) / n / 8) * 1000).toFixed(1)} µs/projection`);
await engine.close();
