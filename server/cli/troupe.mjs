#!/usr/bin/env node
// `npx troupe` from the repository: runs the TypeScript CLI through tsx's loader. (The bundled
// build, `npm run build`, produces dist/server/troupe.js, which runs without it.)
import { register } from 'tsx/esm/api';

register();
await import('./main.ts');
