// Packages the extension: a clean build of the extension bundle (extension/esbuild.mjs) and of the
// webviews (webview/esbuild.mjs, when present) into extension/dist, then `vsce package
// --no-dependencies` through vsce's API into extension/dist/troupe.vsix. Everything the extension
// needs is bundled, so the .vsix carries no node_modules (and none of the server's native modules);
// extension/.vscodeignore names the files it does carry.
//   node extension/scripts/package.mjs [--out PATH]
import { createVSIX } from '@vscode/vsce';
import { existsSync } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { buildExtension } from '../esbuild.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));
const extensionDir = join(root, 'extension');
export const defaultVsixPath = join(extensionDir, 'dist', 'troupe.vsix');

/** Builds and packages; returns the .vsix path and its size in bytes. */
export async function packageExtension({ out = defaultVsixPath } = {}) {
  // A stale file left in dist/ (an old webview chunk) would otherwise ship.
  await rm(join(extensionDir, 'dist'), { recursive: true, force: true });
  await buildExtension();
  const webviewBuild = join(root, 'webview', 'esbuild.mjs');
  if (existsSync(webviewBuild)) {
    const { buildWebviews } = await import(pathToFileURL(webviewBuild).href);
    await buildWebviews(join(extensionDir, 'dist', 'webview'));
  } else {
    console.warn('webview/esbuild.mjs not found: packaging without the dashboard and inspector bundles');
  }
  const packagePath = resolve(out);
  await createVSIX({
    cwd: extensionDir,
    packagePath,
    dependencies: false,
    // The repository is not published anywhere yet; the README has no relative links to rewrite.
    allowMissingRepository: true,
  });
  return { path: packagePath, bytes: (await stat(packagePath)).size };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const i = process.argv.indexOf('--out');
  const out = i >= 0 ? process.argv[i + 1] : undefined;
  const { path, bytes } = await packageExtension(out === undefined ? {} : { out });
  console.log(`${path}  ${(bytes / 1024).toFixed(1)} KiB`);
}
