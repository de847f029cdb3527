/**
 * What the machine has for the GPU providers, read from the system rather than from ONNX
 * Runtime: the NVIDIA driver, the CUDA libraries the dynamic linker can find, the Vulkan loader
 * and the Vulkan devices `vulkaninfo` lists. `troupe doctor` prints it beside the probe report,
 * so a provider that fails comes with the missing piece named. Linux only; elsewhere every
 * field says it was not looked up.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cudaProviderLibrary } from './provider-probe.ts';

/** Shared libraries the CUDA provider of onnxruntime-node 1.30 loads (CUDA 12, cuDNN 9). */
export const CUDA_LIBRARIES = ['libcudart.so.12', 'libcublas.so.12', 'libcublasLt.so.12', 'libcufft.so.11', 'libcurand.so.10', 'libcudnn.so.9'] as const;

export interface VulkanDevice {
  readonly name: string;
  /** 'DISCRETE_GPU', 'INTEGRATED_GPU', 'VIRTUAL_GPU', 'CPU' (software: lavapipe, SwiftShader) or 'OTHER'. */
  readonly type: string;
  readonly driver: string;
}

export interface HostDevices {
  readonly cuda: {
    /** onnxruntime-node's CUDA provider library, and whether it is installed. */
    readonly providerLibrary: { readonly path: string; readonly installed: boolean };
    /** First line of /proc/driver/nvidia/version, or null without the NVIDIA kernel driver. */
    readonly nvidiaDriver: string | null;
    /** Each library of CUDA_LIBRARIES with where the dynamic linker finds it (null: not found). */
    readonly libraries: Readonly<Record<string, string | null>>;
  };
  readonly vulkan: {
    /** Where the dynamic linker finds libvulkan.so.1 (Dawn's only way to a GPU on Linux), or null. */
    readonly loader: string | null;
    /** Devices `vulkaninfo --summary` lists, or null when it is not installed (Debian: vulkan-tools). */
    readonly devices: readonly VulkanDevice[] | null;
  };
}

function run(file: string, args: readonly string[]): Promise<string | null> {
  return new Promise((resolve) => {
    execFile(file, [...args], { timeout: 20_000, maxBuffer: 4 << 20 }, (err, stdout) => resolve(err ? null : stdout));
  });
}

/** `ldconfig -p` lines "libfoo.so.1 (libc6,x86-64) => /path" as name → path. */
export function parseLdconfig(text: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)/.exec(line);
    if (m && !found.has(m[1]!)) found.set(m[1]!, m[3]!);
  }
  return found;
}

/** The "Devices:" section of `vulkaninfo --summary`: one entry per GPUn block. */
export function parseVulkanSummary(text: string): VulkanDevice[] {
  const section = text.split(/^Devices:\s*$/m)[1] ?? '';
  return section
    .split(/^GPU\d+:\s*$/m)
    .slice(1)
    .map((block) => {
      const field = (key: string) => new RegExp(`^\\s*${key}\\s*=\\s*(.+)$`, 'm').exec(block)?.[1]?.trim() ?? '';
      return { name: field('deviceName'), type: field('deviceType').replace(/^PHYSICAL_DEVICE_TYPE_/, '') || 'OTHER', driver: field('driverInfo') || field('driverName') };
    });
}

export async function hostDevices(): Promise<HostDevices> {
  const linux = process.platform === 'linux';
  const [ldconfig, vulkaninfo] = linux ? await Promise.all([run('ldconfig', ['-p']).then((t) => t ?? run('/sbin/ldconfig', ['-p'])), run('vulkaninfo', ['--summary'])]) : [null, null];
  const libs = parseLdconfig(ldconfig ?? '');
  // LD_LIBRARY_PATH is searched before the cache; a library found there counts too.
  const onPath = (name: string) => (process.env['LD_LIBRARY_PATH'] ?? '').split(':').filter(Boolean).map((d) => `${d}/${name}`).find((p) => existsSync(p)) ?? null;
  const where = (name: string) => onPath(name) ?? libs.get(name) ?? null;
  let nvidiaDriver: string | null = null;
  try {
    nvidiaDriver = readFileSync('/proc/driver/nvidia/version', 'utf8').split('\n')[0]!.trim();
  } catch {
    // No NVIDIA kernel driver (or not Linux).
  }
  const provider = cudaProviderLibrary();
  return {
    cuda: {
      providerLibrary: { path: provider, installed: existsSync(provider) },
      nvidiaDriver,
      libraries: Object.fromEntries(CUDA_LIBRARIES.map((l) => [l, where(l)])),
    },
    vulkan: { loader: where('libvulkan.so.1'), devices: vulkaninfo === null ? null : parseVulkanSummary(vulkaninfo) },
  };
}
