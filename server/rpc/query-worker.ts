/**
 * The query thread: the editor's store queries (query-handlers.ts) on a read-only connection of
 * their own, answered as JSON text, so neither the SQLite reads nor the serialisation of a large
 * answer run on the server's event loop (WAL lets this connection read while a run worker commits).
 * Queries run one at a time, in the order the main thread's fair queue sends them.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ErrorCodes, RpcError } from '../protocol/json-rpc.ts';
import { clientRequests } from '../protocol/methods.ts';
import { lowerThreadPriority } from '../runs/thread-priority.ts';
import { openRunStore, type RunStore } from '../store/index.ts';
import { queryHandlers, type QueryHandlers } from './query-handlers.ts';
import { fromQueryWorkerSchema, queryWorkerDataSchema, toQueryWorkerSchema, type FromQueryWorker } from './query-messages.ts';

const port = parentPort;
if (!port) throw new Error('query-worker.ts runs in a worker thread started by the server');
const post = (m: FromQueryWorker) => port.postMessage(fromQueryWorkerSchema.parse(m));
const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

const data = queryWorkerDataSchema.parse(workerData);
// Editor queries share the CPU with training as equals; the main thread, which answers
// `server/status` and relays progress, stays above both (thread-priority.ts).
lowerThreadPriority();

let store: RunStore;
let handlers: QueryHandlers;
try {
  store = openRunStore(data.databasePath, { queryOnly: true });
  handlers = queryHandlers(store);
  post({ kind: 'ready' });
} catch (e) {
  post({ kind: 'open-failed', error: message(e) });
  process.exit(0);
}

port.on('message', (raw: unknown) => {
  const parsed = toQueryWorkerSchema.safeParse(raw);
  if (!parsed.success) throw new Error(`query thread: malformed message: ${parsed.error.message}`);
  const m = parsed.data;
  if (m.kind === 'close') {
    store.close();
    port.close();
    return;
  }
  try {
    const params = clientRequests[m.method].params.parse(m.params);
    const handler = handlers[m.method] as (p: unknown) => unknown;
    post({ kind: 'result', id: m.id, json: JSON.stringify(handler(params)) });
  } catch (e) {
    if (e instanceof RpcError) post({ kind: 'error', id: m.id, code: e.code, message: e.message });
    else post({ kind: 'error', id: m.id, code: ErrorCodes.InternalError, message: message(e) });
  }
});
