import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { hardwareOnlyEnv, manifestDirs, vulkanDriverManifests } from './vulkan-drivers.ts';

const dir = mkdtempSync(join(tmpdir(), 'troupe-vulkan-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const icd = (name: string, library: string) => {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify({ file_format_version: '1.0.0', ICD: { library_path: library, api_version: '1.3.0' } }));
  return path;
};
const lvp = icd('lvp_icd.x86_64.json', 'libvulkan_lvp.so');
const nvidia = icd('nvidia_icd.json', 'libGLX_nvidia.so.0');
// Named like a hardware driver, but its library is SwiftShader's: judged by the library too.
const renamed = icd('custom_icd.json', '/opt/swiftshader/libvk_swiftshader.so');
const broken = join(dir, 'broken_icd.json');
writeFileSync(broken, '{ not json');

test('manifests in a folder named by VK_DRIVER_FILES, software ones marked', () => {
  const found = vulkanDriverManifests({ VK_DRIVER_FILES: dir });
  assert.deepEqual(
    found.map((m) => [m.path, m.software]),
    [
      [broken, false],
      [renamed, true],
      [lvp, true],
      [nvidia, false],
    ],
  );
});

test('the hardware-only environment names only hardware manifests, for old and new loaders', () => {
  const env = hardwareOnlyEnv({ VK_ICD_FILENAMES: [lvp, nvidia, renamed].join(':'), PATH: '/usr/bin' });
  assert.ok(env);
  assert.equal(env['VK_DRIVER_FILES'], nvidia);
  assert.equal(env['VK_ICD_FILENAMES'], nvidia);
  assert.equal(env['VK_LOADER_DRIVERS_DISABLE'], '*lvp*,*swiftshader*');
  assert.equal(env['PATH'], '/usr/bin');
});

test('with only software drivers there is no hardware-only environment', () => {
  assert.equal(hardwareOnlyEnv({ VK_DRIVER_FILES: `${lvp}:${renamed}` }), null);
  assert.equal(hardwareOnlyEnv({ VK_DRIVER_FILES: join(dir, 'missing.json') }), null);
});

test('search folders follow XDG and the loader defaults', () => {
  assert.deepEqual(manifestDirs({ HOME: '/home/u' }), ['/etc/xdg/vulkan/icd.d', '/etc/vulkan/icd.d', '/home/u/.local/share/vulkan/icd.d', '/usr/local/share/vulkan/icd.d', '/usr/share/vulkan/icd.d']);
  assert.deepEqual(manifestDirs({ XDG_DATA_DIRS: '/nix/share', XDG_CONFIG_DIRS: '/cfg' }), ['/cfg/vulkan/icd.d', '/etc/vulkan/icd.d', '/nix/share/vulkan/icd.d']);
});
