/**
 * Child process for the full-disk test (atomic-write.test.ts): run inside a private mount namespace
 * with a tiny tmpfs at <dir>, it writes a checkpoint tensor file and a JSON file there the way
 * checkpoints and exports do, and prints how each write failed as one JSON line per file, then
 * what is left in <dir> (the tmpfs goes with the namespace):
 *   node --import tsx full-disk-writer.ts <dir>
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { writeJsonFile } from '../json-file.ts';
import { writeSafetensorsFile } from '../safetensors.ts';

const dir = process.argv[2];
if (dir === undefined) throw new Error('usage: full-disk-writer.ts <dir>');

const writes: Array<[string, () => Promise<void>]> = [
  // 400 KB of weights on a 64 KB disk.
  ['tool-lora.safetensors', () => writeSafetensorsFile(join(dir, 'tool-lora.safetensors'), new Map([['w', { shape: [100_000], data: new Float32Array(100_000) }]]))],
  ['adapter_config.json', () => writeJsonFile(join(dir, 'adapter_config.json'), { padding: 'x'.repeat(200_000) })],
];
for (const [file, write] of writes) {
  try {
    await write();
    process.stdout.write(`${JSON.stringify({ file, error: null })}\n`);
  } catch (e) {
    process.stdout.write(`${JSON.stringify({ file, error: e instanceof Error ? e.message : String(e), code: (e as NodeJS.ErrnoException).code ?? null })}\n`);
  }
}
process.stdout.write(`${JSON.stringify({ left: readdirSync(dir) })}\n`);
