// The one build script: the server (CLI, run worker, engine worker, query worker) for Node, the extension host
// bundle and the webview bundles, all with esbuild. The server's native packages stay external
// (they load their own .node binaries at run time). `npm run package` builds the .vsix from the
// extension and webview outputs.
import { build } from 'esbuild';
import { buildExtension } from './extension/esbuild.mjs';
import { buildWebviews } from './webview/esbuild.mjs';

const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  sourcemap: true,
  external: ['onnxruntime-node', 'better-sqlite3', 'tsx', 'tsx/*'],
  logLevel: 'info',
  // Prefer a package's ES module build: jsonc-parser's default (UMD) entry loads its parts with a
  // require() of relative paths that esbuild cannot follow, so the bundle would look for them at run time.
  mainFields: ['module', 'main'],
  // ESM bundles still meet CommonJS dependencies that call require().
  banner: { js: "import { createRequire as __troupeCreateRequire } from 'node:module'; const require = __troupeCreateRequire(import.meta.url);" },
};

await build({
  ...common,
  // Workers are found next to the code that starts them (`new URL('./run-worker.js', import.meta.url)`),
  // so every entry lands in the one folder.
  entryPoints: { troupe: 'server/cli/main.ts', 'run-worker': 'server/runs/run-worker.ts', 'engine-worker': 'server/runtime/engine-worker.ts', 'query-worker': 'server/rpc/query-worker.ts' },
  outdir: 'dist/server',
});

// The extension host bundle (extension/dist/extension.cjs) and the config schema it contributes.
await buildExtension();
// The dashboard and trajectory inspector (extension/dist/webview/).
await buildWebviews();
