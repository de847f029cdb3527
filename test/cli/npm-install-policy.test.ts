/**
 * The repository's npm settings, checked with the real npm: `npx troupe` prints no npm warning
 * (an unknown key in `.npmrc` made every npm command warn that it "will stop working in the next
 * major version of npm"), and the install policy that replaced that key — `package.json#allowScripts`
 * denying onnxruntime-node, honoured by npm 11.16 and later — keeps onnxruntime-node's install
 * script (a download of CUDA libraries from NuGet) from running, so installs work offline.
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

const root = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The environment of a user's shell: none of the `npm_*` variables an outer `npm test` exports
 * (they would be read as configuration), and empty user and global npmrc files so that only the
 * repository's own settings are under test. Downloads are pointed at a closed port, so a script
 * that tries one fails rather than reaching the network.
 */
function shellEnv(dir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v;
  writeFileSync(join(dir, 'user-npmrc'), '');
  writeFileSync(join(dir, 'global-npmrc'), '');
  env['npm_config_userconfig'] = join(dir, 'user-npmrc');
  env['npm_config_globalconfig'] = join(dir, 'global-npmrc');
  env['npm_config_update_notifier'] = 'false';
  env['GLOBAL_AGENT_HTTP_PROXY'] = 'http://127.0.0.1:9';
  env['GLOBAL_AGENT_HTTPS_PROXY'] = 'http://127.0.0.1:9';
  delete env['ONNXRUNTIME_NODE_INSTALL'];
  return env;
}

function npm(args: readonly string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('npm', args, { cwd, env, timeout: 120_000 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
      resolve({ code, stdout, stderr });
    });
  });
}

const npmVersion = (): Promise<string> =>
  npm(['--version'], root, process.env).then((r) => r.stdout.trim());

function atLeast(version: string, [major, minor]: readonly [number, number]): boolean {
  const [a = 0, b = 0] = version.split('.').map(Number);
  return a > major || (a === major && b >= minor);
}

describe('npm settings of the repository', () => {
  test('npx troupe --help prints its usage and no npm warning', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'troupe-npx-'));
    try {
      const r = await npm(['exec', '--offline', '--', 'troupe', '--help'], root, shellEnv(dir));
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /usage: troupe <command>/);
      assert.doesNotMatch(r.stderr, /npm warn/i, 'npm warned');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('package.json#allowScripts keeps onnxruntime-node\'s download script from running', async (t) => {
    const version = await npmVersion();
    if (!atLeast(version, [11, 16])) {
      t.skip(`npm ${version} predates allowScripts (11.16); .ci/run sets ONNXRUNTIME_NODE_INSTALL=skip for it`);
      return;
    }
    const pkg = z.object({
      dependencies: z.record(z.string(), z.string()),
      allowScripts: z.record(z.string(), z.union([z.boolean(), z.string()])),
    }).parse(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')));
    const dir = mkdtempSync(join(tmpdir(), 'troupe-allow-scripts-'));
    try {
      // A project with the repository's policy and onnxruntime-node installed (hard links of the
      // repository's copy and of its dependencies), rebuilt as `npm ci` would build it.
      const ort = 'onnxruntime-node';
      const ortPkg = z.object({ dependencies: z.record(z.string(), z.string()) })
        .parse(JSON.parse(readFileSync(join(root, 'node_modules', ort, 'package.json'), 'utf8')));
      mkdirSync(join(dir, 'project', 'node_modules'), { recursive: true });
      for (const name of [ort, ...Object.keys(ortPkg.dependencies)]) {
        execFileSync('cp', ['-al', join(root, 'node_modules', name), join(dir, 'project', 'node_modules', name)]);
      }
      writeFileSync(join(dir, 'project', 'package.json'), JSON.stringify({
        name: 'allow-scripts-probe', version: '1.0.0', private: true,
        dependencies: { [ort]: pkg.dependencies[ort] }, allowScripts: pkg.allowScripts,
      }));
      const env = shellEnv(dir);
      const denied = await npm(['rebuild', ort, '--foreground-scripts'], join(dir, 'project'), env);
      assert.equal(denied.code, 0, denied.stderr);
      assert.doesNotMatch(denied.stdout + denied.stderr, /script\/install|npm warn/i);
      // The same project with the script allowed runs it, and it fails for want of the network:
      // what the denial prevents.
      writeFileSync(join(dir, 'project', 'package.json'), JSON.stringify({
        name: 'allow-scripts-probe', version: '1.0.0', private: true,
        dependencies: { [ort]: pkg.dependencies[ort] }, allowScripts: { ...pkg.allowScripts, [ort]: true },
      }));
      const allowed = await npm(['rebuild', ort, '--foreground-scripts'], join(dir, 'project'), env);
      assert.match(allowed.stdout + allowed.stderr, /script\/install/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
