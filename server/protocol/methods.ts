/**
 * The training server's protocol: every JSON-RPC method with its direction, params and result,
 * declared once. The server's handler tables, the typed client and the JSON Schema snapshot
 * (`server/protocol/protocol.schema.json`) all derive from these tables, so a method cannot be
 * handled with params the client does not send, and a change shows up in review as a diff of the
 * snapshot.
 *
 * Conventions (LSP's): requests are `area/verb`, notifications `area/didEvent`; `initialize` comes
 * first and carries the protocol version; `$/cancelRequest` cancels a request in flight; long
 * requests report through `$/progress` when the client passes a `workDoneToken`.
 *
 * Params are parsed with `z.output` semantics on the server (defaults applied), so clients may omit
 * anything with a default (`z.input`).
 */
import { z } from 'zod';
import { sizeLimits } from './size-limits.ts';
import {
  completionListSchema,
  completionParamsSchema,
  didChangeTextDocumentParamsSchema,
  didCloseTextDocumentParamsSchema,
  didOpenTextDocumentParamsSchema,
  hoverParamsSchema,
  hoverSchema,
  publishDiagnosticsParamsSchema,
} from './lsp.ts';
import {
  checkpointSchema,
  idSchema,
  metricPointSchema,
  metricSchema,
  metricSeriesKeySchema,
  runRecordSchema,
  runStateSchema,
  runSummarySchema,
  stepSummarySchema,
  trajectoryDetailSchema,
  trajectoryPhaseSchema,
  trajectoryQuerySchema,
  trajectorySummarySchema,
} from './trajectory.ts';

/**
 * The protocol's version, `major.minor`. A client whose major differs is refused at `initialize`;
 * minor versions only add methods or optional fields.
 */
export const PROTOCOL_VERSION = '1.0';

/** Token a client passes as `workDoneToken` to receive `$/progress` for that request. */
export const progressTokenSchema = z.union([z.int(), z.string()]);

const workDone = { /** Ask for `$/progress` notifications about this request. */ workDoneToken: progressTokenSchema.optional() };

interface RequestDecl<P extends z.ZodType, R extends z.ZodType> {
  readonly kind: 'request';
  readonly params: P;
  readonly result: R;
  /** One sentence for the schema snapshot and the docs. */
  readonly description: string;
}
interface NotificationDecl<P extends z.ZodType> {
  readonly kind: 'notification';
  readonly params: P;
  readonly description: string;
}
const request = <P extends z.ZodType, R extends z.ZodType>(description: string, params: P, result: R): RequestDecl<P, R> => ({ kind: 'request', params, result, description });
const notification = <P extends z.ZodType>(description: string, params: P): NotificationDecl<P> => ({ kind: 'notification', params, description });

const runIdParams = z.object({ /** The run. */ runId: idSchema }).strict();
const runResult = z.object({ /** The run after the request took effect (a pause or stop completes at the step boundary and is announced by `run/didChangeState`). */ run: runSummarySchema });

// ---- Lifecycle -----------------------------------------------------------------------------------

/**
 * `initialize` params: LSP's InitializeParams (a language client sends them as they are) plus the
 * Troupe protocol version. Unknown LSP fields are accepted and ignored.
 */
export const initializeParamsSchema = z.object({
  /**
   * Troupe protocol version the client speaks, `major.minor`. Language clients omit it; only
   * clients that send it receive the `run/*` notifications.
   */
  protocolVersion: z.string().regex(/^\d+\.\d+$/, 'must look like "1.0"').optional(),
  /** The client's process id (LSP); null when it has none. */
  processId: z.int().nullable().optional(),
  /** Who the client is (LSP). */
  clientInfo: z.object({ name: z.string().max(256), version: z.string().max(256).optional() }).optional(),
  /** Client capabilities (LSP); the server reads none of them yet. */
  capabilities: z.record(z.string(), z.unknown()).optional(),
  /** Free-form options a client passes along (LSP `initializationOptions`). */
  initializationOptions: z.unknown().optional(),
});

/** What the server offers: LSP's InitializeResult plus the Troupe protocol version. */
export const initializeResultSchema = z.object({
  /** Troupe protocol version the server speaks. */
  protocolVersion: z.string(),
  /** The server. */
  serverInfo: z.object({ name: z.string(), version: z.string() }),
  /** LSP server capabilities for experiment config documents. */
  capabilities: z.object({
    /** 2 = incremental document sync (full text changes are accepted too). */
    textDocumentSync: z.object({ openClose: z.boolean(), change: z.int() }),
    completionProvider: z.object({ triggerCharacters: z.array(z.string()) }),
    hoverProvider: z.boolean(),
  }),
  /** The workspace the server serves (folder holding `.troupe/`). */
  workspace: z.string(),
});

// ---- Runs ----------------------------------------------------------------------------------------

export const runStartParamsSchema = z
  .object({
    /** Path of an experiment config file, absolute or relative to the server's workspace (at most 4096 characters). */
    configPath: z.string().min(1).max(sizeLimits.pathLength).optional(),
    /** An experiment config given inline instead of a file. */
    config: z.unknown().optional(),
    /** Train to this step instead of the config's `training.steps` (at most 1000000, as there). */
    steps: z.int().positive().max(sizeLimits.steps).optional(),
    ...workDone,
  })
  .strict()
  .refine((p) => (p.configPath === undefined) !== (p.config === undefined), { message: 'give exactly one of "configPath" and "config"' });

export const runRenameParamsSchema = runIdParams.extend({
  /** The run's new name, shown in the Runs view (1 to 200 characters; spaces at the ends are dropped). */
  name: z.string().trim().min(1).max(200),
});

export const runDeleteResultSchema = z.object({
  /** The run deleted. */
  runId: idSchema,
  /** Its folder, removed: it lay inside the workspace's .troupe/runs. */
  removedFolder: z.string().nullable(),
  /** Its folder, left in place: it lies outside .troupe/runs (`troupe train --run-dir`), or is gone already. */
  keptFolder: z.string().nullable(),
});

export const runResumeParamsSchema = runIdParams.extend({
  /** Train to this step instead of the run's current target (at most 1000000). */
  steps: z.int().positive().max(sizeLimits.steps).optional(),
});

/** A run's state changed (also sent for the state a new run starts in). */
export const runDidChangeStateSchema = z.object({
  runId: idSchema,
  /** New state. */
  state: runStateSchema,
  /** State before; null for a new run. */
  previous: runStateSchema.nullable(),
  /** The run as it is now. */
  run: runSummarySchema,
});

/** A run was renamed. */
export const runDidRenameSchema = z.object({ runId: idSchema, /** The run as it is now. */ run: runSummarySchema });

/** A run was deleted: its rows (and its folder inside .troupe/runs) are gone. */
export const runDidDeleteSchema = z.object({ runId: idSchema });

/** A step of a run was committed: its metrics, per agent and per policy. */
export const runDidProgressSchema = z.object({
  runId: idSchema,
  /** The committed step (0 is the validation of the warm-started policy before RL). */
  step: z.int().nonnegative(),
  /** The step the run trains to. */
  steps: z.int().positive(),
  /** Wall-clock time of the step, milliseconds. */
  stepMs: z.number().nonnegative(),
  /** Estimated time to the last step, milliseconds; null until there is a step to estimate from. */
  etaMs: z.number().nonnegative().nullable(),
  /** Every metric committed for the step. */
  metrics: z.array(metricSchema),
});

/** One point of a warm-up's loss curve: the smoothed (EMA) supervised loss after a step. */
export const warmUpPointSchema = z.object({ step: z.int().positive(), loss: z.number() });
export type WarmUpPoint = z.infer<typeof warmUpPointSchema>;

/**
 * Where a run's warm-up stands: the warm start (`warmStart` in the config), supervised training
 * of each base model on solver demonstrations before step 0. One model at a time.
 */
export const warmUpProgressSchema = z.object({
  /** The base model being warmed up. */
  modelId: z.string(),
  /** Its place among the run's models (1-based), and how many there are. */
  model: z.int().positive(),
  models: z.int().positive(),
  /** What it is doing: collecting solver demonstrations, training on them, or playing a DAgger round. */
  stage: z.enum(['demonstrations', 'training', 'dagger']),
  /** Supervised steps done, of `steps`. */
  step: z.int().nonnegative(),
  steps: z.int().positive(),
  /** The smoothed loss at `step`; null before the first step. */
  loss: z.number().nullable(),
  /** Time left to this model's last step at the recent steps' pace; null before a step was timed. */
  etaMs: z.number().nonnegative().nullable(),
  /** The step of its last warm-up checkpoint (a killed server resumes from there); null when none. */
  checkpointStep: z.int().nonnegative().nullable(),
  /** Loss points since the previous report (in `run/get`: the curve so far, thinned to at most 1000 points). */
  points: z.array(warmUpPointSchema),
});
export type WarmUpProgress = z.infer<typeof warmUpProgressSchema>;

/** A run's warm-up moved on (at most every 250 ms while it trains, and at every checkpoint and stage). */
export const runDidWarmUpSchema = warmUpProgressSchema.extend({ runId: idSchema });

/** A log line of a run (warm start, engine provider choice, resume notes). */
export const runDidLogSchema = z.object({ runId: idSchema, line: z.string() });

// ---- Queries -------------------------------------------------------------------------------------

export const metricsQueryParamsSchema = z
  .object({
    runId: idSchema,
    /** Series to read; absent for every series of the run. */
    series: z.array(metricSeriesKeySchema).max(1000).optional(),
    /** First step to include (for incremental reads). */
    fromStep: z.int().nonnegative().optional(),
    /** Last step to include. */
    toStep: z.int().nonnegative().optional(),
  })
  .strict();

/** One metric series with its points in step order. */
export const metricSeriesSchema = metricSeriesKeySchema.extend({ points: z.array(metricPointSchema) });

export const stepsListParamsSchema = runIdParams.extend({
  /** First step to list. */
  fromStep: z.int().nonnegative().optional(),
  /** At most this many steps. */
  limit: z.int().positive().max(10_000).optional(),
});

export const trajectoriesForTaskParamsSchema = runIdParams.extend({
  /** The task's environment seed; the same seed at two steps is the same task. */
  envSeed: z.int(),
  /** Phase to look in; validation seeds recur at every validated step, training seeds do not. */
  phase: trajectoryPhaseSchema.default('validation'),
});

export const adaptersExportParamsSchema = runIdParams.extend({
  /** Folder to write into; must be new or empty. Absolute, or relative to the workspace. */
  outDir: z.string().min(1).max(sizeLimits.pathLength),
  /** Which checkpoint: `initial` (step 0), `latest` (default), `best` (the best validated step), or a step number. */
  checkpoint: z.union([z.literal('initial'), z.literal('latest'), z.literal('best'), z.int().nonnegative()]).default('latest'),
  ...workDone,
});

export const adaptersExportResultSchema = z.object({
  /** The folder written. */
  outDir: z.string(),
  /** Step of the exported checkpoint. */
  step: z.int().nonnegative(),
  /** Every file written, absolute paths. */
  files: z.array(z.string()),
});

export const serverStatusResultSchema = z.object({
  /** Troupe protocol version. */
  protocolVersion: z.string(),
  /** The server process id. */
  pid: z.int(),
  /** Milliseconds since the server started. */
  uptimeMs: z.number().nonnegative(),
  /** Runs with a live training worker. */
  activeRuns: z.array(idSchema),
  /** Connected clients. */
  clients: z.int().nonnegative(),
  /** Resident set size of the server process, bytes. */
  rssBytes: z.number().nonnegative(),
});

// ---- Progress and cancellation -------------------------------------------------------------------

export const cancelParamsSchema = z.object({ /** Id of the request to cancel. */ id: z.union([z.int(), z.string()]) });

/** LSP work-done progress: begin, report, end. */
export const progressParamsSchema = z.object({
  token: progressTokenSchema,
  value: z.discriminatedUnion('kind', [
    z.object({ kind: z.literal('begin'), title: z.string(), message: z.string().optional(), percentage: z.number().min(0).max(100).optional() }),
    z.object({ kind: z.literal('report'), message: z.string().optional(), percentage: z.number().min(0).max(100).optional() }),
    z.object({ kind: z.literal('end'), message: z.string().optional() }),
  ]),
});

const empty = z.object({}).strict().optional();
const nothing = z.null();

/** Requests a client sends to the server. */
export const clientRequests = {
  initialize: request('Opens the session: protocol version check and server capabilities. Must be the first request.', initializeParamsSchema, initializeResultSchema),
  shutdown: request('Ends the session: only `exit` is accepted afterwards. Runs keep training.', empty, nothing),
  'server/status': request('A cheap health check: version, uptime, active runs, clients, memory.', empty, serverStatusResultSchema),
  'run/start': request('Starts a run from a config file or an inline config; an invalid config is refused with every issue (InvalidConfig).', runStartParamsSchema, runResult),
  'run/pause': request('Pauses a run at its next step boundary (a checkpoint is written); `run/resume` continues it.', runIdParams, runResult),
  'run/resume': request('Continues a paused, failed or interrupted run from its last checkpoint, losing nothing committed.', runResumeParamsSchema, runResult),
  'run/stop': request('Stops a run at its next step boundary; it ends done.', runIdParams, runResult),
  'run/rerun': request('Starts a new run with the config another run started with (as it resolved its relative paths), whatever became of the file since.', runIdParams, runResult),
  'run/rename': request('Renames a run (its label in run lists; the config keeps its name).', runRenameParamsSchema, runResult),
  'run/delete': request(
    'Deletes a run that is not training: its rows, and its folder when that lies inside .troupe/runs. A running, queued or stopping run is refused (InvalidRunState): stop it first.',
    runIdParams,
    runDeleteResultSchema,
  ),
  'run/get': request(
    'One run with its experiment config, and while its warm-up trains where that stands.',
    runIdParams,
    z.object({ run: runRecordSchema, /** Present while the run is warming up in this server: the latest progress, with the loss curve so far. */ warmUp: warmUpProgressSchema.optional() }),
  ),
  'runs/list': request('Every run of the workspace, newest first.', empty, z.object({ runs: z.array(runSummarySchema) })),
  'steps/list': request("A run's committed steps with their counts and timings.", stepsListParamsSchema, z.object({ steps: z.array(stepSummarySchema) })),
  'metrics/query': request("A run's metric series (all, or the ones named), optionally from a step on.", metricsQueryParamsSchema, z.object({ series: z.array(metricSeriesSchema) })),
  'trajectories/query': request("A page of a run's trajectories, filtered by step, phase, agent, success, seed and reward range.", trajectoryQuerySchema, z.object({ trajectories: z.array(trajectorySummarySchema) })),
  'trajectories/forTask': request('The trajectories of one task (environment seed) at every step that ran it, to compare the same task across training.', trajectoriesForTaskParamsSchema, z.object({ trajectories: z.array(trajectorySummarySchema) })),
  'trajectory/get': request('One trajectory, turn by turn, each turn with its sibling branches.', z.object({ /** Trajectory id. */ trajectoryId: z.int().positive() }).strict(), z.object({ trajectory: trajectoryDetailSchema })),
  'checkpoints/list': request("A run's checkpoints.", runIdParams, z.object({ checkpoints: z.array(checkpointSchema) })),
  'adapters/export': request("Writes a run's policies at a checkpoint: LoRA adapters in the PEFT layout, full models as safetensors checkpoints.", adaptersExportParamsSchema, adaptersExportResultSchema),
  'textDocument/completion': request('Completion in an experiment config document.', completionParamsSchema, completionListSchema),
  'textDocument/hover': request('The schema description of the config field under the cursor.', hoverParamsSchema, hoverSchema.nullable()),
} as const;

/** Notifications a client sends to the server. */
export const clientNotifications = {
  initialized: notification('The client processed the initialize result (LSP).', z.unknown()),
  exit: notification('Closes this connection (after `shutdown`). The server and its runs go on.', z.unknown()),
  '$/cancelRequest': notification('Asks to cancel a request in flight: a request that can stop (adapters/export) is answered with RequestCancelled; one that already finished answers with its result.', cancelParamsSchema),
  'textDocument/didOpen': notification('An experiment config document was opened; diagnostics follow.', didOpenTextDocumentParamsSchema),
  'textDocument/didChange': notification('An open config document changed; diagnostics follow.', didChangeTextDocumentParamsSchema),
  'textDocument/didClose': notification('A config document was closed; its diagnostics are cleared.', didCloseTextDocumentParamsSchema),
} as const;

/** Notifications the server sends to clients. */
export const serverNotifications = {
  'run/didChangeState': notification("A run's lifecycle state changed.", runDidChangeStateSchema),
  'run/didProgress': notification("A run's step was committed, with its metrics.", runDidProgressSchema),
  'run/didWarmUp': notification("A run's warm-up (the supervised warm start before step 0) moved on: step, loss, ETA, checkpoint.", runDidWarmUpSchema),
  'run/didLog': notification('A log line of a run.', runDidLogSchema),
  'run/didRename': notification('A run was renamed.', runDidRenameSchema),
  'run/didDelete': notification('A run was deleted.', runDidDeleteSchema),
  'textDocument/publishDiagnostics': notification("A config document's problems (replaces the previous set).", publishDiagnosticsParamsSchema),
  '$/progress': notification('Work-done progress of a request that passed a workDoneToken.', progressParamsSchema),
} as const;

export type ClientRequests = typeof clientRequests;
export type ClientNotifications = typeof clientNotifications;
export type ServerNotifications = typeof serverNotifications;
export type ClientRequestMethod = keyof ClientRequests;
export type ClientNotificationMethod = keyof ClientNotifications;
export type ServerNotificationMethod = keyof ServerNotifications;

/** What a client may send as a request's params (defaults optional). */
export type RequestParamsIn<M extends ClientRequestMethod> = z.input<ClientRequests[M]['params']>;
/** A request's params after parsing (defaults applied), as handlers see them. */
export type RequestParams<M extends ClientRequestMethod> = z.output<ClientRequests[M]['params']>;
/** A request's result. */
export type RequestResult<M extends ClientRequestMethod> = z.infer<ClientRequests[M]['result']>;
export type ClientNotificationParams<M extends ClientNotificationMethod> = z.output<ClientNotifications[M]['params']>;
export type ServerNotificationParams<M extends ServerNotificationMethod> = z.infer<ServerNotifications[M]['params']>;

/** The JSON Schema of every method, for the committed snapshot. */
export function protocolJsonSchema(): Record<string, unknown> {
  const toSchema = (s: z.ZodType, io: 'input' | 'output') => z.toJSONSchema(s, { target: 'draft-07', io, unrepresentable: 'any' });
  const section = (table: Record<string, RequestDecl<z.ZodType, z.ZodType> | NotificationDecl<z.ZodType>>, io: 'input' | 'output') =>
    Object.fromEntries(
      Object.entries(table).map(([method, d]) => [
        method,
        d.kind === 'request'
          ? { description: d.description, params: toSchema(d.params, io), result: toSchema(d.result, 'output') }
          : { description: d.description, params: toSchema(d.params, io) },
      ]),
    );
  return {
    title: 'Troupe training server protocol',
    protocolVersion: PROTOCOL_VERSION,
    clientRequests: section(clientRequests, 'input'),
    clientNotifications: section(clientNotifications, 'input'),
    serverNotifications: section(serverNotifications, 'output'),
  };
}

/** `server/protocol/protocol.schema.json` exactly as the generator writes it. */
export function protocolJsonSchemaText(): string {
  return `${JSON.stringify(protocolJsonSchema(), null, 2)}\n`;
}
