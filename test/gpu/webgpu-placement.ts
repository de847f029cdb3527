/**
 * Child process for `server/models/policy.gpu.test.ts`: builds one of the model's graphs, creates
 * a WebGPU session on it with ONNX Runtime's verbose log on, and exits. The log (stderr, written
 * by native code, so only a parent process can read it) lists which provider each node was
 * placed on, including the MemcpyToHost nodes ORT inserts wherever a CPU node reads a GPU value.
 *
 * Usage: node --import tsx test/gpu/webgpu-placement.ts <decode|decode-device|decode-fused|decode-fp16|decode-fused-device|decode-fp16-device|score|train-ppo-lora|train-ce-full> <fused|primitives>
 */
import * as ort from 'onnxruntime-node';
import { buildDecode, buildScore, buildTrainStep } from '../../server/models/artifacts.ts';
import { buildFusedDecode } from '../../server/models/decode-graph.ts';
import { initParameters } from '../../server/models/init.ts';
import { parseLoraConfig } from '../../server/models/lora.ts';
import { parseModelConfig } from '../../server/models/model-config.ts';

const [graph, lowering] = process.argv.slice(2);
if (lowering !== 'fused' && lowering !== 'primitives') throw new Error(`lowering must be fused or primitives, got '${lowering}'`);
const config = parseModelConfig({ vocabSize: 48, hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 128, tieEmbeddings: false, attentionBias: true });
const lc = parseLoraConfig({ rank: 4, alpha: 8 });
const lora = { rank: lc.rank, alpha: 8, targets: lc.targets };
const low = { logSoftmax: lowering } as const;
const builds: Record<string, () => Uint8Array> = {
  decode: () => buildDecode(config, lora).bytes,
  // The WebGPU decoder: the KV cache stays on the GPU (generate.ts 'device').
  'decode-device': () => buildDecode(config, lora, 'float32', 'device').bytes,
  // The rollout decoders bake their weights (LoRA merged); fp16 converts them to float16.
  'decode-fused': () => buildFusedDecode(config, { weights: 'fp32', lora: null, baked: initParameters(config, 1) }).bytes,
  'decode-fp16': () => buildFusedDecode(config, { weights: 'fp16', lora: null, baked: initParameters(config, 1) }).bytes,
  // What WebGPU rollouts run: the cache kept on the GPU.
  'decode-fused-device': () => buildFusedDecode(config, { weights: 'fp32', lora: null, baked: initParameters(config, 1), cache: 'device', sampleOnDevice: true }).bytes,
  'decode-fp16-device': () => buildFusedDecode(config, { weights: 'fp16', lora: null, baked: initParameters(config, 1), cache: 'device' }).bytes,
  score: () => buildScore(config, lora, 'float32', low).bytes,
  'train-ppo-lora': () => buildTrainStep(config, { loss: 'ppo', trainable: 'lora', lora, kl: true, entropy: true }, low).bytes,
  'train-ce-full': () => buildTrainStep(config, { loss: 'ce', trainable: 'full', lora: null, kl: false, entropy: false }, low).bytes,
};
const build = graph === undefined ? undefined : builds[graph];
if (!build) throw new Error(`unknown graph '${graph}' (one of ${Object.keys(builds).join(', ')})`);
ort.env.logLevel = 'verbose';
await ort.InferenceSession.create(build(), { executionProviders: ['webgpu'], logSeverityLevel: 0, logVerbosityLevel: 0, graphOptimizationLevel: 'all' });
