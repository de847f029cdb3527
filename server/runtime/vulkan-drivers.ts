/**
 * The Vulkan drivers installed on a Linux machine, read from their manifests the way the Vulkan
 * loader finds them, and an environment that hides the software ones (lavapipe, SwiftShader)
 * from a process. `provider-probe.ts` starts WebGPU in such a process: if it still finds an
 * adapter, the machine has a hardware GPU that Dawn can use.
 *
 * The environment names the hardware manifests in VK_DRIVER_FILES and VK_ICD_FILENAMES (which
 * every loader honours) and also sets VK_LOADER_DRIVERS_DISABLE (loaders >= 1.3.234), so a
 * software driver stays hidden whichever the loader reads.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';

/** Manifest or library names of Vulkan implementations that run on the CPU. */
const SOFTWARE = /lvp|lavapipe|swiftshader/i;
/** The same, as globs for VK_LOADER_DRIVERS_DISABLE. */
const SOFTWARE_GLOBS = '*lvp*,*swiftshader*';

export interface VulkanDriverManifest {
  readonly path: string;
  /** The driver library the manifest names (ICD.library_path), or '' when unreadable. */
  readonly library: string;
  readonly software: boolean;
}

/** The loader's search folders for driver manifests (Linux), without duplicates. */
export function manifestDirs(env: NodeJS.ProcessEnv): string[] {
  const list = (v: string | undefined, fallback: string) => (v && v.trim() ? v : fallback).split(':').filter(Boolean);
  const dataHome = env['XDG_DATA_HOME'] || (env['HOME'] ? join(env['HOME'], '.local/share') : '');
  const dirs = [
    ...list(env['XDG_CONFIG_DIRS'], '/etc/xdg').map((d) => join(d, 'vulkan/icd.d')),
    '/etc/vulkan/icd.d',
    ...(dataHome ? [join(dataHome, 'vulkan/icd.d')] : []),
    ...list(env['XDG_DATA_DIRS'], '/usr/local/share:/usr/share').map((d) => join(d, 'vulkan/icd.d')),
  ];
  return [...new Set(dirs)];
}

function manifest(path: string): VulkanDriverManifest {
  let library = '';
  try {
    const v: unknown = JSON.parse(readFileSync(path, 'utf8'));
    const icd = typeof v === 'object' && v !== null && 'ICD' in v ? v.ICD : null;
    if (typeof icd === 'object' && icd !== null && 'library_path' in icd && typeof icd.library_path === 'string') library = icd.library_path;
  } catch {
    // An unreadable manifest is judged by its file name alone.
  }
  return { path, library, software: SOFTWARE.test(basename(path)) || SOFTWARE.test(basename(library)) };
}

function manifestsIn(entry: string): string[] {
  try {
    if (statSync(entry).isDirectory()) return readdirSync(entry).filter((f) => f.endsWith('.json')).sort().map((f) => join(entry, f));
    return [entry];
  } catch {
    return [];
  }
}

/**
 * The driver manifests the loader would read: those VK_DRIVER_FILES (or the older
 * VK_ICD_FILENAMES) names when set — files or folders — else those in the search folders.
 */
export function vulkanDriverManifests(env: NodeJS.ProcessEnv): VulkanDriverManifest[] {
  const named = env['VK_DRIVER_FILES'] || env['VK_ICD_FILENAMES'];
  const entries = named ? named.split(':').filter(Boolean) : manifestDirs(env).filter((d) => existsSync(d));
  return entries.flatMap(manifestsIn).map(manifest);
}

/** `env` with the software Vulkan drivers hidden, or null when no other driver is installed. */
export function hardwareOnlyEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv | null {
  const hardware = vulkanDriverManifests(env).filter((m) => !m.software).map((m) => m.path);
  if (hardware.length === 0) return null;
  const files = hardware.join(':');
  return { ...env, VK_DRIVER_FILES: files, VK_ICD_FILENAMES: files, VK_LOADER_DRIVERS_DISABLE: SOFTWARE_GLOBS };
}
