/**
 * The config documents a client has open, kept in sync from `textDocument/didOpen|didChange|
 * didClose` (like vscode-languageserver's `TextDocuments`). Changes may be full (`{text}`) or
 * incremental (`{range, text}`); LSP applies them in order, each range referring to the text the
 * previous change left, and counts characters in UTF-16 code units (see `LineIndex`).
 *
 * A change that cannot be applied is an error naming the document, not something to guess around:
 * a change for a document that is not open, or one whose version is not newer than the one held,
 * means the client and the server disagree about the text, and diagnostics computed from a guess
 * would point at the wrong places.
 */
import type {
  DidChangeTextDocumentParams,
  DidCloseTextDocumentParams,
  DidOpenTextDocumentParams,
  TextDocumentContentChangeEvent,
} from '../protocol/lsp.ts';
import { LineIndex } from './line-index.ts';

/** An open document at one version. */
export interface ConfigDocument {
  readonly uri: string;
  readonly languageId: string;
  readonly version: number;
  readonly text: string;
}

/** Documents one client may hold open; a client is one editor window, which opens a handful. */
export const MAX_OPEN_DOCUMENTS = 256;

export class ConfigDocuments {
  private readonly byUri = new Map<string, ConfigDocument>();

  /**
   * Opens a document. Opening one that is already open replaces it: a client that reconnects sends
   * `didOpen` again for everything it has open.
   */
  open(params: DidOpenTextDocumentParams): ConfigDocument {
    const { uri, languageId, version, text } = params.textDocument;
    if (!this.byUri.has(uri) && this.byUri.size >= MAX_OPEN_DOCUMENTS) {
      throw new Error(`textDocument/didOpen for ${uri}: ${MAX_OPEN_DOCUMENTS} documents are open already; close some first`);
    }
    const doc: ConfigDocument = { uri, languageId, version, text };
    this.byUri.set(uri, doc);
    return doc;
  }

  /** Applies a `didChange`; returns the document at its new version. */
  change(params: DidChangeTextDocumentParams): ConfigDocument {
    const { uri, version } = params.textDocument;
    const doc = this.byUri.get(uri);
    if (doc === undefined) throw new Error(`textDocument/didChange for ${uri}, which is not open`);
    if (version <= doc.version) {
      throw new Error(`textDocument/didChange for ${uri}: version ${version} is not newer than the open document's version ${doc.version}`);
    }
    let text = doc.text;
    params.contentChanges.forEach((change, i) => {
      text = applyChange(text, change, `textDocument/didChange for ${uri}, change ${i}`);
    });
    const next: ConfigDocument = { ...doc, version, text };
    this.byUri.set(uri, next);
    return next;
  }

  /** Closes a document. */
  close(params: DidCloseTextDocumentParams): void {
    const { uri } = params.textDocument;
    if (!this.byUri.delete(uri)) throw new Error(`textDocument/didClose for ${uri}, which is not open`);
  }

  /** The open document with this URI, or undefined. */
  get(uri: string): ConfigDocument | undefined {
    return this.byUri.get(uri);
  }

  /** Every open document, in the order they were opened. */
  all(): ConfigDocument[] {
    return [...this.byUri.values()];
  }
}

/**
 * One content change applied to `text`. A range past the end is clamped (LSP's rule for positions);
 * a range whose end comes before its start is an error, named by `where`.
 */
export function applyChange(text: string, change: TextDocumentContentChangeEvent, where: string): string {
  if (change.range === undefined) return change.text;
  const index = new LineIndex(text);
  const start = index.offsetAt(change.range.start);
  const end = index.offsetAt(change.range.end);
  if (end < start) {
    const { start: s, end: e } = change.range;
    throw new Error(`${where}: range end ${e.line}:${e.character} comes before its start ${s.line}:${s.character}`);
  }
  return text.slice(0, start) + change.text + text.slice(end);
}
