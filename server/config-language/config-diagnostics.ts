/**
 * Diagnostics for a config file, each at the exact text it is about:
 *  - syntax errors at their offset (and nothing else: without the value the trainer would read,
 *    schema errors on a half-parsed tree would mostly be noise);
 *  - the schema's and the cross-field rules' issues (`safeParseExperimentConfig`) at the node their
 *    path names: the value for a bad value, the key for an unknown key, the enclosing object's key
 *    (or the file's opening brace) for a missing property;
 *  - the environment's issues: options against its options schema, router against its agents;
 *  - issues found outside the text and passed in (the server's check of the paths the config
 *    names: a checkpoint folder that is missing or outside the workspace);
 *  - warnings for legal but suspicious things (duplicate keys; a learning rate meant for LoRA
 *    adapters on a policy that trains all its weights) and information on settings with no effect.
 */
import type { Node } from 'jsonc-parser';
import { formatConfigPath, type ConfigIssue } from '../protocol/config-errors.ts';
import { safeParseExperimentConfig, type ExperimentConfig } from '../protocol/experiment-config.ts';
import { DiagnosticCode, DiagnosticSeverity, diagnosticSource, type Diagnostic } from '../protocol/lsp.ts';
import { field } from './config-schema.ts';
import { environmentIssues } from './environment-check.ts';
import { childNode, keyOf, keysOf, type ParsedConfig } from './parsed-config.ts';

export { DiagnosticCode, diagnosticSource } from '../protocol/lsp.ts';

/**
 * Issues about a key rather than its value. These are the messages `config-errors.ts` (unknown
 * key, invalid record key) and `checkAgainstAgents` (unknown agent) write; a test pins them.
 */
const keyIssue = /^(unknown key|invalid name|unknown agent) /;
const missingSuffix = ', but it is missing';

/** Every diagnostic for the document, sorted by position; `pathIssues` are errors at their fields. */
export function diagnoseConfig(doc: ParsedConfig, pathIssues: readonly ConfigIssue[] = []): Diagnostic[] {
  const make = (range: Diagnostic['range'], severity: DiagnosticSeverity, code: DiagnosticCode, message: string): Diagnostic => ({
    range,
    severity,
    source: diagnosticSource,
    message,
    code,
  });
  if (doc.syntaxErrors.length > 0) {
    return doc.syntaxErrors.map((e) => make(doc.range(e.offset, e.length), DiagnosticSeverity.Error, DiagnosticCode.Syntax, e.message));
  }
  if (!doc.value.ok) return [];
  const json = doc.value.json;
  const out: Diagnostic[] = [];
  const fromIssue = (issue: ConfigIssue, severity: DiagnosticSeverity, code: DiagnosticCode): void => {
    const at = locateIssue(doc, issue);
    out.push(make(at.range, severity, code, at.message));
  };

  const parsed = safeParseExperimentConfig(json);
  const config = parsed.success ? parsed.config : undefined;
  if (!parsed.success) for (const issue of parsed.issues) fromIssue(issue, DiagnosticSeverity.Error, DiagnosticCode.Config);
  for (const issue of environmentIssues(json, config)) fromIssue(issue, DiagnosticSeverity.Error, DiagnosticCode.Environment);
  for (const issue of pathIssues) fromIssue(issue, DiagnosticSeverity.Error, DiagnosticCode.Path);

  for (const key of duplicateKeys(doc.root)) {
    out.push(make(doc.rangeOfNode(key), DiagnosticSeverity.Warning, DiagnosticCode.DuplicateKey, `duplicate key ${JSON.stringify(key.value)}: this occurrence is ignored, the last one wins`));
  }
  if (config !== undefined) {
    for (const issue of suspicious(config)) fromIssue(issue, DiagnosticSeverity.Warning, DiagnosticCode.Suspicious);
  }
  for (const issue of noEffect(json)) fromIssue(issue, DiagnosticSeverity.Information, DiagnosticCode.NoEffect);

  return out.sort((a, b) => a.range.start.line - b.range.start.line || a.range.start.character - b.range.start.character);
}

/** Where an issue points and how to say it, prefixed with its path (the Problems panel lists many files). */
function locateIssue(doc: ParsedConfig, issue: ConfigIssue): { range: Diagnostic['range']; message: string } {
  const { path, message } = issue;
  const where = formatConfigPath(path);
  // The deepest node of the path that the file has.
  let node = doc.root;
  let depth = 0;
  while (node !== undefined && depth < path.length) {
    const next = childNode(node, path[depth]!);
    if (next === undefined) break;
    node = next;
    depth++;
  }
  if (node === undefined) return { range: doc.range(0, 0), message: `${where}: ${message}` };
  if (depth === path.length) {
    const key = keyOf(node);
    const range = key !== undefined && keyIssue.test(message) ? doc.rangeOfNode(key) : doc.anchorRange(node);
    return { range, message: path.length === 0 ? message : `${where}: ${message}` };
  }
  const range = doc.anchorRange(node);
  if (depth === path.length - 1 && message.endsWith(missingSuffix)) {
    const parent = depth === 0 ? '' : ` in ${formatConfigPath(path.slice(0, depth))}`;
    return { range, message: `missing required property ${JSON.stringify(path[depth])}${parent}: ${message.slice(0, -missingSuffix.length)}` };
  }
  // A value the file does not set: the rule fails on its default.
  return { range, message: `${where} (not set, so its default applies): ${message}` };
}

/** Every key of an object that the same object repeats later (JSON.parse keeps the last). */
function duplicateKeys(root: Node | undefined): Node[] {
  const out: Node[] = [];
  const visit = (node: Node): void => {
    const keys = keysOf(node);
    keys.forEach((k, i) => {
      if (keys.slice(i + 1).some((later) => later.value === k.value)) out.push(k);
    });
    for (const child of node.children ?? []) visit(child);
  };
  if (root !== undefined) visit(root);
  return out;
}

/**
 * Above this, a learning rate is one for LoRA adapters: `optimizer.lr`'s description and the
 * shipped L1/L3 configs use about 1e-4 for training all weights, and 1e-3 (the default) for adapters.
 */
const fullWeightsLrLimit = 3e-4;

/** Legal settings that are probably mistakes. */
function suspicious(c: ExperimentConfig): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const full = Object.entries(c.policies).filter(([, p]) => p.lora === undefined).map(([id]) => JSON.stringify(id));
  if (full.length > 0 && c.optimizer.lr > fullWeightsLrLimit) {
    const who = full.length === 1 ? `policy ${full[0]} trains all its weights` : `policies ${full.join(', ')} train all their weights`;
    issues.push({ path: ['optimizer', 'lr'], message: `${c.optimizer.lr} is a learning rate for LoRA adapters, but ${who}, which usually wants about 1e-4` });
  }
  return issues;
}

/**
 * Settings that do nothing: warm-start settings while the warm start is off, DAgger episodes
 * without DAgger rounds, missing proposals without flawed ones, curriculum candidates with the
 * uniform curriculum.
 */
function noEffect(json: unknown): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const warmStart = field(json, 'warmStart');
  if (field(warmStart, 'enabled') === false && typeof warmStart === 'object' && warmStart !== null) {
    for (const k of Object.keys(warmStart)) if (k !== 'enabled') issues.push({ path: ['warmStart', k], message: 'has no effect: warmStart.enabled is false' });
  } else if (field(field(warmStart, 'dagger'), 'rounds') === 0 && field(field(warmStart, 'dagger'), 'episodes') !== undefined) {
    issues.push({ path: ['warmStart', 'dagger', 'episodes'], message: 'has no effect: warmStart.dagger.rounds is 0' });
  }
  const proposals = field(warmStart, 'proposals');
  if (field(warmStart, 'enabled') !== false && field(proposals, 'flawedEvery') === 0 && field(proposals, 'missingEvery') !== undefined) {
    issues.push({ path: ['warmStart', 'proposals', 'missingEvery'], message: 'has no effect: warmStart.proposals.flawedEvery is 0 (missing proposals replace some of the flawed ones)' });
  }
  const curriculum = field(field(json, 'algorithm'), 'curriculum');
  if (field(curriculum, 'kind') !== 'greedy-failures' && field(curriculum, 'candidates') !== undefined) {
    issues.push({ path: ['algorithm', 'curriculum', 'candidates'], message: "has no effect: only the 'greedy-failures' curriculum screens candidates" });
  }
  return issues;
}
