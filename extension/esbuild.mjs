// Builds the extension host bundle: extension/src/main.ts and everything it imports (the protocol,
// zod, ws, vscode-languageclient) into one CommonJS file, extension/dist/extension.cjs, which is
// what VS Code loads (`main` in extension/package.json). CommonJS because VS Code 1.100 loads
// extensions with require(); `.cjs` because extension/package.json says "type": "module" (so the
// TypeScript sources are ES modules like the rest of the repository), and VS Code loads a `.cjs`
// main as CommonJS whatever the package type.
// Also copies the experiment config JSON Schema (configs/schema.json, generated from zod) to
// extension/schema/, where the manifest's jsonValidation points.
//   node -e "import('./extension/esbuild.mjs').then((m) => m.buildExtension())"
import { build } from 'esbuild';
import { zodEnglishOnly } from '../esbuild-zod-english.mjs';
import { copyFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const extensionDir = join(root, 'extension');

/**
 * Builds into extension/dist and extension/schema. Returns the bundle's path and size in bytes.
 * `minify` (default true) is what ships; pass false for readable stack traces while debugging.
 */
export async function buildExtension({ minify = true } = {}) {
  const outfile = join(extensionDir, 'dist', 'extension.cjs');
  const result = await build({
    absWorkingDir: root,
    entryPoints: [join(extensionDir, 'src', 'main.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    // The Node inside VS Code 1.100 (Electron 34) is 20.x.
    target: 'node20',
    format: 'cjs',
    // `vscode` is provided by the extension host. bufferutil and utf-8-validate are optional
    // native speed-ups ws tries to require and does without; they must not be bundled or required.
    external: ['vscode', 'bufferutil', 'utf-8-validate'],
    // Prefer packages' ES module builds (jsonc-parser's UMD build hides its requires from esbuild).
    mainFields: ['module', 'main'],
    minify,
    // Names survive minification so errors in the extension host log stay readable.
    keepNames: true,
    sourcemap: 'linked',
    metafile: true,
    logLevel: 'warning',
    plugins: [zodEnglishOnly],
    // The clone this bundle is built from: with no troupe in a workspace and no
    // troupe.server.command, the extension serves the workspace with this clone's CLI.
    define: { __TROUPE_CLONE__: JSON.stringify(root.replace(/[\\/]+$/, '')) },
  });
  await mkdir(join(extensionDir, 'schema'), { recursive: true });
  await copyFile(join(root, 'configs', 'schema.json'), join(extensionDir, 'schema', 'experiment-config.schema.json'));
  const bytes = result.metafile.outputs[join('extension', 'dist', 'extension.cjs')]?.bytes ?? 0;
  return { outfile, bytes };
}

// Run directly: build and print the size.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { outfile, bytes } = await buildExtension({ minify: !process.argv.includes('--no-minify') });
  console.log(`${outfile}  ${(bytes / 1024).toFixed(1)} KiB`);
}
