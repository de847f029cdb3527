/**
 * Writes `configs/schema.json`, the JSON Schema of experiment configs, from the zod schema.
 * Every config names it in `"$schema"`, so editors validate and complete configs with it.
 *
 *   node --import tsx server/protocol/generate-config-schema.ts           rewrite the file
 *   node --import tsx server/protocol/generate-config-schema.ts --check   exit 1 if it is stale
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { experimentConfigJsonSchemaText } from './experiment-config.ts';

const path = fileURLToPath(new URL('../../configs/schema.json', import.meta.url));
const text = experimentConfigJsonSchemaText();

if (process.argv.includes('--check')) {
  let current = '';
  try {
    current = readFileSync(path, 'utf8');
  } catch {
    // A missing file is stale too.
  }
  if (current !== text) {
    console.error(`${path} is stale: run npm run schema`);
    process.exit(1);
  }
  console.log(`${path} is up to date`);
} else {
  writeFileSync(path, text);
  console.log(`wrote ${path}`);
}
