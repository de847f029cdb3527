// An esbuild plugin shared by the extension and webview builds. zod's `z` namespace re-exports all
// of its ~50 locales (~250 KiB minified) and the protocol modules import `z` whole, so they do not
// tree-shake. Nothing selects a locale (zod reports in English by default, set by its own
// `config(en())`), so zod's locale index is replaced by one that has English only.
import { dirname, join, sep } from 'node:path';

export const zodEnglishOnly = {
  name: 'zod-english-only',
  setup(b) {
    b.onResolve({ filter: /[\\/]locales[\\/]index\.js$/ }, (args) => {
      if (!args.importer.includes(`${sep}zod${sep}`)) return undefined;
      return { path: join(dirname(args.importer), args.path), namespace: 'zod-locales' };
    });
    b.onLoad({ filter: /.*/, namespace: 'zod-locales' }, (args) => ({
      contents: `export { default as en } from './en.js';`,
      resolveDir: dirname(args.path),
      loader: 'js',
    }));
  },
};
