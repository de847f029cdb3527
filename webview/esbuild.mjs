// Bundles the webviews for the browser: one IIFE per webview plus the CSS it imports (uPlot's sheet
// comes in dashboard.css), minified with source maps, into <outDir>/{dashboard,inspector}.{js,css}.
// The extension's panels load exactly these four files (extension/src/panels/*-panel.ts).
//   node -e "import('./webview/esbuild.mjs').then(m => m.buildWebviews('/tmp/wv'))"
import { build } from 'esbuild';
import { zodEnglishOnly } from '../esbuild-zod-english.mjs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Entry points by output name; the panels reference these names. */
export const webviewEntries = {
  dashboard: 'webview/src/dashboard/main.ts',
  inspector: 'webview/src/inspector/main.ts',
  compare: 'webview/src/compare/main.ts',
};

/**
 * Builds every webview bundle into `outDir` (relative paths are taken from the repository root).
 * Returns the output files (absolute paths) with their sizes in bytes.
 */
export async function buildWebviews(outDir = 'extension/dist/webview') {
  const result = await build({
    absWorkingDir: root,
    entryPoints: webviewEntries,
    outdir: outDir,
    bundle: true,
    platform: 'browser',
    format: 'iife',
    // VS Code 1.100's webviews run Chromium 132 (Electron 34).
    target: 'chrome120',
    minify: true,
    sourcemap: true,
    metafile: true,
    legalComments: 'linked',
    logLevel: 'warning',
    plugins: [zodEnglishOnly],
  });
  return Object.fromEntries(Object.entries(result.metafile.outputs).map(([file, o]) => [join(root, file), o.bytes]));
}

// Run directly: build into the default folder and print the sizes.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const sizes = await buildWebviews(process.argv[2]);
  for (const [file, bytes] of Object.entries(sizes)) console.log(`${file}  ${(bytes / 1024).toFixed(1)} KiB`);
}
