// The one build script: bundles the server (CLI + engine worker) for Node with esbuild.
// Native packages stay external (they load their own .node binaries at run time).
// The extension and webview bundles join this file when those packages land.
import { build } from 'esbuild';

const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  sourcemap: true,
  external: ['onnxruntime-node', 'better-sqlite3', 'tsx', 'tsx/*'],
  logLevel: 'info',
  // ESM bundles still meet CommonJS dependencies that call require().
  banner: { js: "import { createRequire as __troupeCreateRequire } from 'node:module'; const require = __troupeCreateRequire(import.meta.url);" },
};

await build({
  ...common,
  entryPoints: { troupe: 'server/cli/main.ts', 'engine-worker': 'server/runtime/engine-worker.ts' },
  outdir: 'dist/server',
});
