/**
 * Messages between the engine (main thread) and its worker. Both ends are our own code in one
 * process, so these are plain types, not a parsed boundary; untrusted data (configs, RPC,
 * checkpoints) is validated before it gets here.
 */
import type { GenerateRequest, GenerateResult, GenerateStep } from './generate.ts';
import type { ProviderReport } from './provider-choice.ts';
import type { HostTensor, TensorDType } from './tensor.ts';

export type ExecutionProviderName = 'cpu' | 'cuda' | 'webgpu';
export type ExecutionProviderChoice = ExecutionProviderName | 'auto';

export interface SessionOptions {
  /** ORT graph optimisation level; 'basic' keeps float64 numerics exact (see the probe). */
  readonly optimization?: 'disabled' | 'basic' | 'extended' | 'all';
  /**
   * Keep ONNX Runtime's CPU memory arena (default true). Each session's arena keeps its peak for
   * the session's life; a graph run once per step with large transient tensors (scoring at a real
   * vocabulary) gives its memory back between runs without one.
   */
  readonly memoryArena?: boolean;
  /** Intra-op threads for this session (default: the engine's `threads`). */
  readonly threads?: number;
  /**
   * Let idle intra-op threads spin for work (ONNX Runtime's default, true). Off, a pool thread
   * sleeps between kernels: less CPU burnt when other processes share the cores, more wake-up
   * latency per kernel.
   */
  readonly spinning?: boolean;
  /** Write an ONNX Runtime profile (per-kernel times) to `<prefix>_<date>.json` when the session is released. */
  readonly profileFilePrefix?: string;
  /**
   * Outputs that stay on the GPU when the session runs on WebGPU (`preferredOutputLocation`
   * 'gpu-buffer'): the KV cache of a 'device' decode graph, a train step's gradients, AdamW's
   * weights and moments. A fetch of one `into` a resident makes the resident that GPU tensor.
   * Ignored on the CPU.
   */
  readonly outputsOnDevice?: readonly string[];
}

export interface SessionInfo {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  readonly executionProvider: ExecutionProviderName;
}

/** A feed: a tensor sent with the call, or the name of a tensor resident in the worker. */
export type Feed = HostTensor | { readonly resident: string };
/** A fetch: return the output, or write it into a resident tensor (allocated on first use). */
export type Fetch = 'return' | { readonly into: string; readonly dtype: TensorDType; readonly dims: readonly number[] };

/** Rows `start` … `start + count − 1` of a tensor, along its first axis. */
export interface RowRange {
  readonly start: number;
  readonly count: number;
}

export type Request =
  | { kind: 'init'; provider: ExecutionProviderChoice; threads: number }
  | { kind: 'createSession'; session: string; model: Uint8Array; options: SessionOptions }
  | { kind: 'releaseSession'; session: string }
  | { kind: 'upload'; name: string; tensor: HostTensor }
  | { kind: 'download'; name: string; rows?: RowRange }
  | { kind: 'drop'; names: readonly string[] }
  | { kind: 'swap'; pairs: ReadonlyArray<readonly [string, string]> }
  | { kind: 'accumulate'; pairs: ReadonlyArray<readonly [into: string, from: string]>; scale: number }
  | { kind: 'run'; session: string; feeds: Record<string, Feed>; fetches: Record<string, Fetch> }
  /** `steps`: post each decoding step's tokens (a `step` message) while generating. */
  | { kind: 'generate'; request: GenerateRequest; steps?: boolean }
  | { kind: 'stats' };

/** What the worker holds: resident tensors (count and bytes) and sessions. */
export interface EngineStats {
  readonly residentTensors: number;
  readonly residentBytes: number;
  /** WebGPU: resident tensors with a device copy, its bytes, and host→device copies made so far. */
  readonly deviceCopies: number;
  readonly deviceCopyBytes: number;
  readonly deviceUploads: number;
  readonly sessions: number;
}

export type Reply =
  | { kind: 'ok' }
  | { kind: 'init'; provider: ExecutionProviderName; reason: string; report: ProviderReport }
  | { kind: 'session'; info: SessionInfo }
  | { kind: 'tensor'; tensor: HostTensor }
  | { kind: 'outputs'; outputs: Record<string, HostTensor> }
  | { kind: 'generated'; result: GenerateResult }
  | { kind: 'stats'; stats: EngineStats };

export type WorkerMessage =
  | { id: number; ok: true; reply: Reply }
  | { id: number; ok: false; error: string }
  /** A decoding step of the `generate` request `id`, posted before its reply. */
  | { id: number; step: GenerateStep }
  | { id: -1; log: string };
