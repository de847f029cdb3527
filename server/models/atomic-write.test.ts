/**
 * A full disk mid-write: the error names the file (Node's write errors name none) and keeps its
 * errno code, and no temporary file is left. The disk is a real 64 KB tmpfs, mounted in a private
 * mount namespace (`unshare -rm`, no root needed) around a child process that writes there.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

const child = fileURLToPath(new URL('./testing/full-disk-writer.ts', import.meta.url));

/** Runs `sh -c script` in a new user + mount namespace, or says why it cannot. */
function inMountNamespace(script: string): { stdout: string } | { skip: string } {
  const probe = spawnSync('unshare', ['-rm', 'true'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) return { skip: `no private mount namespace here (unshare -rm: ${probe.error?.message ?? probe.stderr.trim()})` };
  const r = spawnSync('unshare', ['-rm', 'sh', '-c', script], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  return { stdout: r.stdout };
}

test('ENOSPC while writing a checkpoint tensor file or a JSON file names the file, keeps the code, leaves nothing', (t) => {
  const disk = mkdtempSync(join(tmpdir(), 'troupe-full-disk-'));
  try {
    const r = inMountNamespace(`mount -t tmpfs -o size=64k tmpfs '${disk}' && exec '${process.execPath}' --import tsx '${child}' '${disk}'`);
    if ('skip' in r) return t.skip(r.skip);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { file?: string; error?: string | null; code?: string | null; left?: string[] });
    for (const file of ['tool-lora.safetensors', 'adapter_config.json']) {
      const line = lines.find((l) => l.file === file);
      assert.ok(line?.error, `${file}: the write should fail on a full disk: ${r.stdout}`);
      assert.equal(line.code, 'ENOSPC');
      assert.ok(line.error.includes(join(disk, file)), `names the file: ${line.error}`);
      assert.match(line.error, /no space left on device/);
    }
    assert.deepEqual(lines.at(-1)?.left, [], 'no temporary file is left behind');
  } finally {
    rmSync(disk, { recursive: true, force: true });
  }
});
