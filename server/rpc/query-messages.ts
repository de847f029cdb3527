/**
 * What travels between the server's main thread and its query thread (query-thread.ts,
 * query-worker.ts). Both sides parse what they receive: the query thread is our code, but it is
 * where a bug or an out-of-memory lands, and a malformed message must fail at the boundary.
 */
import { z } from 'zod';
import { queryMethods } from './query-handlers.ts';

/** `workerData` of the query thread (beside `entry`, which the TypeScript boot file consumes). */
export const queryWorkerDataSchema = z.object({
  /** Absolute path of the workspace's run store, already opened (created, migrated) by the main thread. */
  databasePath: z.string().min(1),
});
export type QueryWorkerData = z.infer<typeof queryWorkerDataSchema>;

/** Main thread → query thread: run one query (params already parsed at the connection; parsed again there). */
export const toQueryWorkerSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('query'), id: z.int().nonnegative(), method: z.enum(queryMethods), params: z.unknown() }),
  /** Close the store and exit. */
  z.object({ kind: z.literal('close') }),
]);
export type ToQueryWorker = z.infer<typeof toQueryWorkerSchema>;

/** Query thread → main thread. */
export const fromQueryWorkerSchema = z.discriminatedUnion('kind', [
  /** The store is open; queries may come. */
  z.object({ kind: z.literal('ready') }),
  /** The store could not be opened; the thread exits next. */
  z.object({ kind: z.literal('open-failed'), error: z.string() }),
  /** A query's result, already serialised: the main thread splices the text into its answer unparsed. */
  z.object({ kind: z.literal('result'), id: z.int().nonnegative(), json: z.string() }),
  /** A query's error: an application code (unknown run, not found) or InternalError. */
  z.object({ kind: z.literal('error'), id: z.int().nonnegative(), code: z.int(), message: z.string() }),
]);
export type FromQueryWorker = z.infer<typeof fromQueryWorkerSchema>;
