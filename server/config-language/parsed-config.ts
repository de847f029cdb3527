/**
 * A config file's text parsed once for the language features: jsonc-parser's syntax tree (which
 * keeps offsets, and survives syntax errors so completion works while typing), the syntax errors,
 * the JSON value the trainer would read, and the mapping from JSON paths to text ranges.
 *
 * Config files are plain JSON (the trainer reads them with `JSON.parse`), so comments and trailing
 * commas are syntax errors here even though jsonc-parser could accept them.
 */
import { parseTree, printParseErrorCode, type Node, type ParseError } from 'jsonc-parser';
import type { ConfigPath } from '../protocol/config-errors.ts';
import type { Range } from '../protocol/lsp.ts';
import { LineIndex } from './line-index.ts';

/** A syntax error with its span and a message. */
export interface SyntaxProblem {
  readonly offset: number;
  readonly length: number;
  readonly message: string;
}

export class ParsedConfig {
  readonly lines: LineIndex;
  /** The syntax tree; undefined only for a text with no value at all. */
  readonly root: Node | undefined;
  readonly syntaxErrors: readonly SyntaxProblem[];
  /**
   * The value, when the text has no syntax error, from `JSON.parse` as the trainer reads it
   * (jsonc-parser's `getNodeValue` would turn a `"__proto__"` key into a prototype).
   */
  readonly value: { readonly ok: true; readonly json: unknown } | { readonly ok: false };

  constructor(readonly text: string) {
    this.lines = new LineIndex(text);
    const errors: ParseError[] = [];
    this.root = parseTree(text, errors, { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false });
    this.syntaxErrors = describeSyntaxErrors(text, errors);
    let value: ParsedConfig['value'] = { ok: false };
    if (this.syntaxErrors.length === 0) {
      try {
        value = { ok: true, json: JSON.parse(text) };
      } catch (e) {
        // jsonc-parser accepted something JSON.parse does not: report JSON.parse's complaint.
        this.syntaxErrors = [{ offset: 0, length: Math.min(1, text.length), message: `not valid JSON: ${e instanceof Error ? e.message : String(e)}` }];
      }
    }
    this.value = value;
  }

  /**
   * The value's node at `path`, or undefined. A duplicated key resolves to its last occurrence,
   * the one `JSON.parse` keeps.
   */
  nodeAt(path: ConfigPath): Node | undefined {
    let node = this.root;
    for (const segment of path) node = node === undefined ? undefined : childNode(node, segment);
    return node;
  }

  /**
   * The value as far as the text parses: `JSON.parse`'s when it does, else the tree's with the
   * properties that have no value left out (the one being typed usually has none). Enough to pick
   * a union's branch and read declared ids while the user is typing.
   */
  looseValue(): unknown {
    return this.value.ok ? this.value.json : treeValue(this.root);
  }

  /** The range of [offset, offset + length). */
  range(offset: number, length: number): Range {
    return this.lines.rangeOf(offset, offset + length);
  }

  /** The range of a node. */
  rangeOfNode(node: Node): Range {
    return this.range(node.offset, node.length);
  }

  /**
   * Where to point at a container (object or array) without underlining all of it: the key of the
   * property it is the value of, or else its opening bracket. Scalars are pointed at whole.
   */
  anchorRange(node: Node): Range {
    if (node.type !== 'object' && node.type !== 'array') return this.rangeOfNode(node);
    const key = keyOf(node);
    return key !== undefined ? this.rangeOfNode(key) : this.range(node.offset, 1);
  }
}

/** The child of an object (by key, last occurrence) or array (by index). */
export function childNode(node: Node, segment: string | number): Node | undefined {
  if (typeof segment === 'number') return node.type === 'array' ? node.children?.[segment] : undefined;
  if (node.type !== 'object') return undefined;
  let found: Node | undefined;
  for (const property of node.children ?? []) {
    const [key, value] = property.children ?? [];
    if (key?.value === segment && value !== undefined) found = value;
  }
  return found;
}

/** The key node of the property whose value `node` is, if it is one. */
export function keyOf(node: Node): Node | undefined {
  const property = node.parent;
  if (property?.type !== 'property') return undefined;
  const key = property.children?.[0];
  return key !== undefined && key !== node ? key : undefined;
}

/** The JSON path of a value node (a property key's path is its value's). */
export function pathOf(node: Node): Array<string | number> {
  const path: Array<string | number> = [];
  let n: Node | undefined = node;
  while (n?.parent !== undefined) {
    const parent: Node = n.parent;
    if (parent.type === 'property') {
      const key = parent.children?.[0]?.value;
      if (typeof key === 'string') path.unshift(key);
      n = parent.parent;
    } else {
      if (parent.type === 'array') path.unshift(parent.children?.indexOf(n) ?? 0);
      n = parent;
    }
  }
  return path;
}

/** The keys of an object node, in order (duplicates included). */
export function keysOf(node: Node | undefined): Node[] {
  if (node?.type !== 'object') return [];
  return (node.children ?? []).flatMap((p) => (p.children?.[0] === undefined ? [] : [p.children[0]]));
}

/** The value of a tree that may have syntax errors; properties without a value are left out. */
function treeValue(node: Node | undefined): unknown {
  if (node === undefined) return undefined;
  switch (node.type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const p of node.children ?? []) {
        const [key, v] = p.children ?? [];
        if (typeof key?.value === 'string' && v !== undefined) Object.defineProperty(out, key.value, { value: treeValue(v), enumerable: true, writable: true, configurable: true });
      }
      return out;
    }
    case 'array':
      return (node.children ?? []).map(treeValue);
    default:
      return node.value;
  }
}

const syntaxMessages: Record<string, string> = {
  InvalidSymbol: 'unexpected character',
  InvalidNumberFormat: 'invalid number',
  PropertyNameExpected: 'expected a property name in double quotes',
  ValueExpected: 'expected a value',
  ColonExpected: 'expected ":" after the property name',
  CommaExpected: 'expected "," between items',
  CloseBraceExpected: 'expected "}" to close the object',
  CloseBracketExpected: 'expected "]" to close the array',
  EndOfFileExpected: 'expected the end of the file: a config is a single JSON object',
  InvalidCommentToken: 'comments are not allowed: a config file is plain JSON (the trainer reads it with JSON.parse)',
  UnexpectedEndOfComment: 'unterminated comment (and comments are not allowed in plain JSON)',
  UnexpectedEndOfString: 'unterminated string',
  UnexpectedEndOfNumber: 'incomplete number',
  InvalidUnicode: 'invalid \\u escape: it needs 4 hex digits',
  InvalidEscapeCharacter: 'invalid escape: JSON allows \\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX',
  InvalidCharacter: 'invalid character in a string: control characters such as tabs and line breaks must be escaped',
};

/**
 * jsonc-parser's errors as messages. A trailing comma shows up as "property name expected" or
 * "value expected" at the closing bracket; it is reported once, at the comma, as what it is.
 */
function describeSyntaxErrors(text: string, errors: readonly ParseError[]): SyntaxProblem[] {
  if (text.trim() === '') return [{ offset: 0, length: 0, message: 'the file is empty: a config is a JSON object (configs/ has examples)' }];
  const out: SyntaxProblem[] = [];
  const seen = new Set<string>();
  for (const e of errors) {
    const name = printParseErrorCode(e.error);
    let problem: SyntaxProblem;
    const closer = text[e.offset];
    const comma = (closer === '}' || closer === ']') && (name === 'PropertyNameExpected' || name === 'ValueExpected') ? previousNonSpace(text, e.offset) : -1;
    if (comma >= 0 && text[comma] === ',') {
      problem = { offset: comma, length: 1, message: `trailing comma before "${closer}": JSON allows none` };
    } else {
      const found = e.length > 0 && e.length <= 20 ? `, found ${JSON.stringify(text.slice(e.offset, e.offset + e.length))}` : '';
      const atEnd = e.offset >= text.length ? ' at the end of the file' : '';
      problem = { offset: e.offset, length: e.length, message: `${syntaxMessages[name] ?? name}${found}${atEnd}` };
    }
    const key = `${problem.offset}:${problem.length}`;
    if (!seen.has(key)) out.push(problem);
    seen.add(key);
  }
  return out;
}

function previousNonSpace(text: string, offset: number): number {
  let i = offset - 1;
  while (i >= 0 && /\s/.test(text[i]!)) i--;
  return i;
}
