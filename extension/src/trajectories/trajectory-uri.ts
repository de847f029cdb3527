/**
 * The `troupe:` URI of a trajectory document: `troupe:/<run>/step-<n>/trajectory-<id>.trajectory`.
 *
 * Only the last segment identifies the document; the run and step segments are there for people
 * (they show in the tab's breadcrumb and in the diff editor's title bar). The `.trajectory`
 * extension is what gives the document its language id, so highlighting needs no extra wiring.
 * The short form `troupe:/trajectory-<id>.trajectory` is accepted too, for links typed by hand.
 *
 * Pure: works on the `{ scheme, path }` of a `vscode.Uri` (structurally) or on a URI string, so it
 * is unit-tested without VS Code.
 */

export const TROUPE_SCHEME = 'troupe';
/** File extension of trajectory documents; the manifest maps it to the language below. */
export const TRAJECTORY_EXTENSION = '.trajectory';

/** What a trajectory URI names. */
export interface TrajectoryRef {
  /** Trajectory id (positive integer, as the store assigns it). */
  readonly trajectoryId: number;
  /** Run name or id, for display; absent in the short form. */
  readonly run?: string;
  /** Training step, for display; absent in the short form. */
  readonly step?: number;
}

/** The parts of a URI this module reads; `vscode.Uri` has them. */
export interface UriLike {
  readonly scheme: string;
  readonly path: string;
}

const LAST_SEGMENT = /^trajectory-([0-9]+)\.trajectory$/;
const STEP_SEGMENT = /^step-([0-9]+)$/;

/**
 * The run segment as it goes into the path. A run name may hold `/` (idSchema allows any non-empty
 * string), which would add a path segment and break parsing, so separators are replaced; the
 * segment is informational, so the substitution loses nothing that matters.
 */
export function runSegment(run: string): string {
  const cleaned = run.replace(/[/\\]/g, '_').trim();
  return cleaned === '' || cleaned === '.' || cleaned === '..' ? '_' : cleaned;
}

/** The decoded path of a trajectory URI, for `vscode.Uri.from({ scheme: TROUPE_SCHEME, path })`. */
export function trajectoryUriPath(ref: TrajectoryRef): string {
  assertTrajectoryId(ref.trajectoryId);
  const last = `trajectory-${ref.trajectoryId}${TRAJECTORY_EXTENSION}`;
  if (ref.run === undefined || ref.step === undefined) return `/${last}`;
  if (!Number.isSafeInteger(ref.step) || ref.step < 0) throw new Error(`trajectory URI: step must be a non-negative integer, got ${String(ref.step)}`);
  return `/${runSegment(ref.run)}/step-${ref.step}/${last}`;
}

/** The URI as a string (each path segment percent-encoded), e.g. for logs and tests. */
export function formatTrajectoryUri(ref: TrajectoryRef): string {
  const path = trajectoryUriPath(ref).split('/').map(encodeURIComponent).join('/');
  return `${TROUPE_SCHEME}:${path}`;
}

/**
 * Reads a trajectory URI. Throws an Error naming the URI and what is wrong with it, since the
 * message reaches the user when VS Code fails to open the document.
 */
export function parseTrajectoryUri(uri: UriLike | string): TrajectoryRef {
  const { scheme, path, shown } = typeof uri === 'string' ? splitUriString(uri) : { ...uri, shown: `${uri.scheme}:${uri.path}` };
  const fail = (why: string): never => {
    throw new Error(`not a Troupe trajectory URI: ${shown}: ${why} (expected ${TROUPE_SCHEME}:/<run>/step-<n>/trajectory-<id>${TRAJECTORY_EXTENSION})`);
  };
  if (scheme !== TROUPE_SCHEME) fail(`scheme is '${scheme}', not '${TROUPE_SCHEME}'`);
  if (!path.startsWith('/')) fail('the path must start with /');
  const segments = path.slice(1).split('/');
  const last = segments[segments.length - 1] ?? '';
  const idMatch = LAST_SEGMENT.exec(last);
  if (idMatch === null) fail(`the last segment '${last}' is not trajectory-<id>${TRAJECTORY_EXTENSION}`);
  const trajectoryId = Number(idMatch?.[1]);
  if (!Number.isSafeInteger(trajectoryId) || trajectoryId < 1) fail(`trajectory id must be a positive integer, got '${idMatch?.[1] ?? ''}'`);
  if (segments.length === 1) return { trajectoryId };
  if (segments.length !== 3) fail(`expected 1 or 3 path segments, got ${segments.length}`);
  const [run = '', stepSegment = ''] = segments;
  if (run === '') fail('the run segment is empty');
  const stepMatch = STEP_SEGMENT.exec(stepSegment);
  if (stepMatch === null) fail(`the step segment '${stepSegment}' is not step-<n>`);
  const step = Number(stepMatch?.[1]);
  if (!Number.isSafeInteger(step)) fail(`step '${stepMatch?.[1] ?? ''}' is too large`);
  return { trajectoryId, run, step };
}

/** Scheme and decoded path of a URI string; a malformed escape is reported like any other defect. */
function splitUriString(uri: string): { scheme: string; path: string; shown: string } {
  const colon = uri.indexOf(':');
  const scheme = colon > 0 ? uri.slice(0, colon) : '';
  // Query and fragment carry nothing for trajectory documents; VS Code drops neither, so ignore them.
  const rest = colon > 0 ? uri.slice(colon + 1).replace(/[?#].*$/, '') : uri;
  let path: string;
  try {
    path = rest.split('/').map((s) => decodeURIComponent(s)).join('/');
  } catch {
    throw new Error(`not a Troupe trajectory URI: ${uri}: malformed percent-encoding`);
  }
  return { scheme, path, shown: uri };
}

function assertTrajectoryId(id: number): void {
  if (!Number.isSafeInteger(id) || id < 1) throw new Error(`trajectory URI: trajectory id must be a positive integer, got ${String(id)}`);
}
