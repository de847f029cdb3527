/**
 * Which execution provider an engine uses, decided from what a probe found (`provider-probe.ts`).
 * Pure, so every branch is tested without the hardware it describes.
 *
 * `auto` takes a real GPU or nothing: CUDA first, then WebGPU on a hardware adapter, else CPU.
 * A software WebGPU adapter (Mesa's lavapipe, SwiftShader: Vulkan on the CPU) computes the same
 * numbers much more slowly than ONNX Runtime's own CPU kernels, so `auto` never picks it; it is
 * there for tests without a GPU, and `webgpu` named explicitly still uses it.
 */
import type { ExecutionProviderChoice, ExecutionProviderName } from './messages.ts';

/** What probing one provider found. */
export interface ProviderStatus {
  /** A one-node model ran on it. */
  readonly available: boolean;
  /** Why it is not available, or what it runs on when it is. */
  readonly detail: string;
}

export interface WebGpuStatus extends ProviderStatus {
  /**
   * The adapter Dawn picks: 'hardware' when one is found with the software Vulkan drivers
   * disabled, 'software' when only lavapipe/SwiftShader provide one; null when there is none.
   */
  readonly adapter: 'hardware' | 'software' | null;
  /**
   * Whether that adapter runs float16 kernels (WebGPU's shader-f16, which fp16 rollout weights
   * need): a float16 multiply gave the float16 result. Absent when there is no adapter.
   */
  readonly float16?: boolean;
}

/** The providers probed for one choice; a provider that was not probed is absent. */
export interface ProviderReport {
  /** onnxruntime-node's version. */
  readonly ortVersion: string;
  /** The backends this onnxruntime-node build lists (`listSupportedBackends`). */
  readonly backends: readonly string[];
  readonly cuda?: ProviderStatus;
  readonly webgpu?: WebGpuStatus;
}

export interface ProviderDecision {
  readonly provider: ExecutionProviderName;
  /** One line saying why, for the engine's log. */
  readonly reason: string;
}

/** Which providers must be probed to decide `choice`. */
export function providersToProbe(choice: ExecutionProviderChoice): ReadonlyArray<'cuda' | 'webgpu'> {
  return choice === 'auto' ? ['cuda', 'webgpu'] : choice === 'cpu' ? [] : [choice];
}

function webgpuSummary(s: WebGpuStatus): string {
  if (!s.available) return `webgpu: ${s.detail}`;
  return s.adapter === 'software' ? `webgpu: ${s.detail}, slower than cpu` : `webgpu: ${s.detail}`;
}

export function chooseProvider(choice: ExecutionProviderChoice, report: ProviderReport): ProviderDecision {
  const notProbed = (p: string) => `${p} was not probed`;
  switch (choice) {
    case 'cpu':
      return { provider: 'cpu', reason: 'cpu as configured' };
    case 'cuda': {
      const s = report.cuda;
      if (s?.available) return { provider: 'cuda', reason: `cuda as configured (${s.detail})` };
      return { provider: 'cpu', reason: `cuda unavailable, fell back to cpu: ${s?.detail ?? notProbed('cuda')}` };
    }
    case 'webgpu': {
      const s = report.webgpu;
      if (!s?.available) return { provider: 'cpu', reason: `webgpu unavailable, fell back to cpu: ${s?.detail ?? notProbed('webgpu')}` };
      const note = s.adapter === 'software' ? '; same results as cpu, much slower: meant for tests' : '';
      return { provider: 'webgpu', reason: `webgpu as configured (${s.detail}${note})` };
    }
    case 'auto': {
      const { cuda, webgpu } = report;
      if (cuda?.available) return { provider: 'cuda', reason: `auto chose cuda (${cuda.detail})` };
      if (webgpu?.available && webgpu.adapter === 'hardware') {
        return { provider: 'webgpu', reason: `auto chose webgpu (${webgpu.detail}; cuda: ${cuda?.detail ?? notProbed('cuda')})` };
      }
      const why = [`cuda: ${cuda?.detail ?? notProbed('cuda')}`, webgpu ? webgpuSummary(webgpu) : `webgpu: ${notProbed('webgpu')}`];
      return { provider: 'cpu', reason: `auto chose cpu (no GPU provider: ${why.join('; ')})` };
    }
  }
}
