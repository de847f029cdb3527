/**
 * Writes the committed JSON Schemas generated from the zod schemas:
 *   configs/schema.json                    experiment configs; every config names it in "$schema",
 *                                          so editors validate and complete configs with it
 *   server/protocol/protocol.schema.json   every RPC method's params and result, so a protocol
 *                                          change shows up in review as a diff of this file
 *
 *   node --import tsx server/protocol/generate-schemas.ts           rewrite both files
 *   node --import tsx server/protocol/generate-schemas.ts --check   exit 1 if either is stale
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { experimentConfigJsonSchemaText } from './experiment-config.ts';
import { protocolJsonSchemaText } from './methods.ts';

const files = [
  { path: fileURLToPath(new URL('../../configs/schema.json', import.meta.url)), text: experimentConfigJsonSchemaText() },
  { path: fileURLToPath(new URL('./protocol.schema.json', import.meta.url)), text: protocolJsonSchemaText() },
];

let stale = 0;
for (const { path, text } of files) {
  if (process.argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(path, 'utf8');
    } catch {
      // A missing file is stale too.
    }
    if (current === text) console.log(`${path} is up to date`);
    else {
      console.error(`${path} is stale: run npm run schema`);
      stale++;
    }
  } else {
    writeFileSync(path, text);
    console.log(`wrote ${path}`);
  }
}
process.exit(stale > 0 ? 1 : 0);
