/**
 * One diagnostic per mistake in a config that names its own `$schema`. VS Code lets a `$schema`
 * win over every schema association, so its JSON language features check such a file against
 * that schema (the repository's `configs/schema.json`, the same rules as the server's) whatever
 * the extension serves, and each schema mistake would be reported twice: by VS Code in the
 * schema's words and by the server in its own. The extension cannot withdraw VS Code's, so it
 * withdraws the server's copy: a server `config` diagnostic (the schema's and the cross-field
 * rules' issues) goes when a JSON diagnostic from the schema covers the same text, or, for a
 * missing property, names the same property. The server's other diagnostics (environments,
 * routing, paths, suspicious settings) and any `config` one VS Code did not echo stay. Pure: the
 * language client applies it whenever either side's diagnostics change.
 */
import { DiagnosticCode, diagnosticSource } from '../../server/protocol/lsp.ts';

interface Position {
  readonly line: number;
  readonly character: number;
}
interface Range {
  readonly start: Position;
  readonly end: Position;
}
/** The parts of a diagnostic (vscode.Diagnostic or LSP) this reads. */
export interface EchoDiagnostic {
  readonly range: Range;
  readonly message: string;
  readonly source?: string | undefined;
  readonly code?: unknown;
}

/**
 * The source VS Code's JSON language features put on their parser's diagnostics (syntax, duplicate
 * keys); their schema check's diagnostics carry none (seen in VS Code 1.100's Problems panel).
 */
export const jsonLanguageSource = 'json';

/** Whether a diagnostic comes from VS Code's JSON language features. */
const fromJsonLanguage = (d: EchoDiagnostic) => d.source === jsonLanguageSource || d.source === undefined || d.source === '';

/**
 * Whether a JSON diagnostic is the schema's verdict on the content: vscode-json-languageservice
 * gives those codes below 0x100 (0 undefined, 1 enum mismatch, 2 deprecated); syntax errors and
 * duplicate keys are 0x100-0x2ff, a schema that cannot be loaded 0x300 and up.
 */
const isSchemaCode = (code: unknown) => code === undefined || (typeof code === 'number' && code < 0x100);

const codeOf = (d: EchoDiagnostic): unknown => (typeof d.code === 'object' && d.code !== null && 'value' in d.code ? d.code.value : d.code);

const before = (a: Position, b: Position) => a.line < b.line || (a.line === b.line && a.character < b.character);

/** Whether two ranges share text (or, for an empty range, touch the same point). */
function overlaps(a: Range, b: Range): boolean {
  return !before(a.end, b.start) && !before(b.end, a.start);
}

/** The property a server "missing" issue is about (config-diagnostics.ts `locateIssue`): `missing required property "steps" in training: …`. */
function missingProperty(message: string): string | null {
  return /^missing required property "([^"]+)"/.exec(message)?.[1] ?? null;
}

/** VS Code's words for a required property that is absent: `Missing property "steps".` */
function jsonMissingProperty(message: string): string | null {
  return /^Missing property "([^"]+)"/.exec(message)?.[1] ?? null;
}

/** The server's diagnostics without those that VS Code's schema check already reports. */
export function withoutSchemaEchoes<D extends EchoDiagnostic>(server: readonly D[], json: readonly EchoDiagnostic[]): D[] {
  const schemaSays = json.filter((d) => fromJsonLanguage(d) && isSchemaCode(codeOf(d)));
  if (schemaSays.length === 0) return [...server];
  const missing = new Set(schemaSays.map((d) => jsonMissingProperty(d.message)).filter((p) => p !== null));
  return server.filter((d) => {
    if (d.source !== diagnosticSource || codeOf(d) !== DiagnosticCode.Config) return true;
    const property = missingProperty(d.message);
    if (property !== null) return !missing.has(property);
    return !schemaSays.some((j) => jsonMissingProperty(j.message) === null && overlaps(j.range, d.range));
  });
}
