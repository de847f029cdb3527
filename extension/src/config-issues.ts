/**
 * Turning a refused `run/start` into something the user can act on: the InvalidConfig error's
 * `data.issues` ({ path, message } per problem, plus the path's segments) become an error message
 * naming the first problems, and the first problem's position in the file is where the editor
 * opens. The language client's diagnostics mark every range; this only decides what to say and
 * where to put the cursor.
 */
import { findNodeAtLocation, parseTree } from 'jsonc-parser';
import { invalidConfigDataSchema, type InvalidConfigData } from '../../server/protocol/json-rpc.ts';

export type ConfigIssueData = InvalidConfigData['issues'][number];

/** The issues of an InvalidConfig error's data, or null when it carries none. */
export function parseInvalidConfigData(data: unknown): ConfigIssueData[] | null {
  const parsed = invalidConfigDataSchema.safeParse(data);
  return parsed.success && parsed.data.issues.length > 0 ? parsed.data.issues : null;
}

/** How many issues the error message lists before "and N more". */
const LISTED = 3;

/** `plan.json is not a valid experiment config: algorithm.k: must be at least 2; router: … (and 2 more)`. */
export function formatInvalidConfig(fileName: string, issues: ReadonlyArray<Pick<ConfigIssueData, 'path' | 'message'>>): string {
  const listed = issues.slice(0, LISTED).map((i) => (i.path === '' ? i.message : `${i.path}: ${i.message}`));
  const more = issues.length > LISTED ? ` (and ${issues.length - LISTED} more)` : '';
  return `${fileName} is not a valid experiment config: ${listed.join('; ')}${more}`;
}

/**
 * The offset in `text` of the deepest existing node on an issue's path: the field itself when it
 * exists, else its nearest parent (a missing field is reported on the object that lacks it).
 * 0 when nothing on the path exists or the text does not parse.
 */
export function issueOffset(text: string, segments: readonly (string | number)[]): number {
  const root = parseTree(text);
  if (!root) return 0;
  for (let n = segments.length; n >= 0; n--) {
    const node = findNodeAtLocation(root, [...segments.slice(0, n)]);
    // A property's value node: step back to its key so the cursor lands on the name.
    if (node) return node.parent?.type === 'property' ? node.parent.offset : node.offset;
  }
  return 0;
}
