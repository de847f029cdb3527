// Worker entry used when the server runs from TypeScript sources (tests, `npm start`): Node 20
// does not carry the parent's `--import tsx` loader into worker threads, so register it here and
// then load the real worker module. The bundled build starts `engine-worker.js` directly.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.entry);
