/**
 * Every message between the extension host and the webviews (dashboard, trajectory inspector, run
 * comparison),
 * both directions, declared once as zod schemas; the types are `z.infer` of them. Both ends parse
 * what they receive (`parseMessage`): the host parses what a webview posts, a webview parses what
 * the host posts. A message that does not parse is logged with what was wrong and dropped, never
 * acted on.
 *
 * The payloads reuse the server protocol's schemas (metric series, progress, trajectory detail), so
 * the webviews check exactly the shapes the server sends and nothing is declared twice. The webview
 * states (`getState`/`setState`, and what a WebviewPanelSerializer gets back after a reload) live
 * here too: the host parses them when it restores a panel.
 */
import { z } from 'zod';
import { metricSeriesSchema, runDidProgressSchema, warmUpProgressSchema } from '../../server/protocol/methods.ts';
import { idSchema, runSummarySchema, trajectoryDetailSchema, trajectoryPhaseSchema, trajectorySummarySchema } from '../../server/protocol/trajectory.ts';

const message = <T extends string, S extends z.ZodRawShape>(type: T, shape: S) => z.object({ type: z.literal(type), ...shape }).strict();

// ---- Shared -------------------------------------------------------------------------------------

/** The webview's script runs and listens: the host (re)sends everything it needs. */
const readyMessage = message('ready', {});
/** A webview reports a problem (a message it refused, a render error) to the host's log. */
const logMessage = message('log', { level: z.enum(['info', 'warn', 'error']), message: z.string().max(10_000) });
/** Whether the training server is connected; webviews show "server not running" instead of stale data. */
const connectionMessage = message('connection', { connected: z.boolean() });
/** A request of the host on the webview's behalf failed; shown in the webview. */
const errorMessage = message('error', { message: z.string() });
/** The two messages every host sends its webview, shown in the webview's banner (`status-banner.ts`). */
export type HostStatus = z.infer<typeof connectionMessage> | z.infer<typeof errorMessage>;

// ---- Dashboard ----------------------------------------------------------------------------------

/** What the dashboard remembers across hide/show and reloads: which run, which charts are hidden (never the data). */
export const dashboardStateSchema = z.object({
  runId: idSchema,
  /** Ids of the charts the user hid. */
  hiddenCharts: z.array(z.string()).max(200).default([]),
  /** Ids of the charts whose y axis fits every point (by default outliers are left out and marked). */
  fitAllCharts: z.array(z.string()).max(200).default([]),
});
export type DashboardState = z.infer<typeof dashboardStateSchema>;

export const hostToDashboardSchema = z.discriminatedUnion('type', [
  /** The run and its whole metric history; replaces anything the dashboard holds. */
  message('init', {
    runId: idSchema,
    /** The run as listed; null when the server does not know it (deleted database). */
    run: runSummarySchema.nullable(),
    /** The step the run trains to, when known before the first progress. */
    steps: z.int().positive().nullable(),
    series: z.array(metricSeriesSchema),
    /** Where the warm-up stands, with its loss curve so far, while the run warms up (`run/get`); null otherwise. */
    warmUp: warmUpProgressSchema.nullable().default(null),
  }),
  /** The warm-up moved on (the server's `run/didWarmUp`, minus the run id): its points are the new ones. */
  warmUpProgressSchema.extend({ type: z.literal('warmUp') }).strict(),
  /** More points (a gap filled after a reconnect, or the answer to `requestSeries`); merged by step. */
  message('series', { series: z.array(metricSeriesSchema) }),
  /** One committed step with every metric of it (the server's `run/didProgress`, minus the run id). */
  runDidProgressSchema.omit({ runId: true }).extend({ type: z.literal('progress') }).strict(),
  /** The run's lifecycle state changed. */
  message('state', { run: runSummarySchema }),
  connectionMessage,
  errorMessage,
]);
export type HostToDashboard = z.infer<typeof hostToDashboardSchema>;

export const dashboardToHostSchema = z.discriminatedUnion('type', [
  readyMessage,
  /** The dashboard saw a step gap: send the points from this step on (as a `series` message). */
  message('requestSeries', { fromStep: z.int().nonnegative() }),
  logMessage,
]);
export type DashboardToHost = z.infer<typeof dashboardToHostSchema>;

// ---- Trajectory inspector -----------------------------------------------------------------------

/** How response tokens are shaded. */
export const shadingModeSchema = z.enum(['logprob', 'advantage']);
export type ShadingMode = z.infer<typeof shadingModeSchema>;

/** What the inspector remembers: which trajectory and the shading mode. */
export const inspectorStateSchema = z.object({
  trajectoryId: z.int().positive(),
  shading: shadingModeSchema.default('logprob'),
});
export type InspectorState = z.infer<typeof inspectorStateSchema>;

export const hostToInspectorSchema = z.discriminatedUnion('type', [
  /** The host is fetching this trajectory. */
  message('loading', { trajectoryId: z.int().positive() }),
  /** One trajectory with every turn's sibling branches (`trajectory/get`). */
  message('trajectory', { detail: trajectoryDetailSchema }),
  /** The same task (environment seed) at every step that ran it, to follow it through training. */
  message('taskHistory', { envSeed: z.int(), phase: trajectoryPhaseSchema, trajectories: z.array(trajectorySummarySchema) }),
  connectionMessage,
  errorMessage,
]);
export type HostToInspector = z.infer<typeof hostToInspectorSchema>;

export const inspectorToHostSchema = z.discriminatedUnion('type', [
  readyMessage,
  /** Open another trajectory (a sibling from another rollout, or the same task at another step). */
  message('openTrajectory', { trajectoryId: z.int().positive() }),
  /** Compare this trajectory with another one (or let the user pick when `otherId` is absent) in a diff editor. */
  message('compareWith', { trajectoryId: z.int().positive(), otherId: z.int().positive().optional() }),
  logMessage,
]);
export type InspectorToHost = z.infer<typeof inspectorToHostSchema>;

// ---- Run comparison -----------------------------------------------------------------------------

/** What the comparison remembers across hide/show and reloads: which runs, how smooth (never the data). */
export const compareStateSchema = z.object({
  runIds: z.array(idSchema).min(1).max(50),
  /** The EMA weight of the smoothed lines, 0 (raw) to 0.99. */
  smoothing: z.number().min(0).max(0.99).default(0.6),
});
export type CompareState = z.infer<typeof compareStateSchema>;

/** One run of the comparison with its history; `series` is empty when it could not be read (`error` says why). */
const comparedRunSchema = z.object({
  runId: idSchema,
  label: z.string(),
  run: runSummarySchema.nullable(),
  series: z.array(metricSeriesSchema),
  error: z.string().optional(),
});

export const hostToCompareSchema = z.discriminatedUnion('type', [
  /** The runs and their whole histories, in the order picked; replaces anything the view holds. */
  message('init', { runs: z.array(comparedRunSchema).min(1).max(50) }),
  /** A step one of the runs committed. */
  message('progress', { runId: idSchema, step: z.int().nonnegative(), metrics: runDidProgressSchema.shape.metrics }),
  /** A run's state or name changed. */
  message('state', { run: runSummarySchema, label: z.string() }),
  connectionMessage,
  errorMessage,
]);
export type HostToCompare = z.infer<typeof hostToCompareSchema>;

export const compareToHostSchema = z.discriminatedUnion('type', [readyMessage, logMessage]);
export type CompareToHost = z.infer<typeof compareToHostSchema>;

// ---- Parsing ------------------------------------------------------------------------------------

export type ParseResult<T> = { readonly ok: true; readonly message: T } | { readonly ok: false; readonly error: string };

/**
 * Parses one posted message. On failure `error` says which message it was (by its `type`, when it
 * has one) and what was wrong, path by path, for the log.
 */
export function parseMessage<S extends z.ZodType>(schema: S, data: unknown, from: string): ParseResult<z.infer<S>> {
  const r = schema.safeParse(data);
  if (r.success) return { ok: true, message: r.data };
  const type = typeof data === 'object' && data !== null && 'type' in data ? String((data as { type: unknown }).type).slice(0, 60) : undefined;
  const what = type === undefined ? `a message without a "type"` : `message "${type}"`;
  return { ok: false, error: `${from}: refused ${what}: ${z.prettifyError(r.error)}` };
}
