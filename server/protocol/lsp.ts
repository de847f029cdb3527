/**
 * The subset of the Language Server Protocol (3.17) the server speaks for experiment config files:
 * document sync, diagnostics, completion and hover. `vscode-languageclient` in the extension sends
 * and receives these shapes; `server/config-language/` computes the answers.
 *
 * Inbound params are parsed leniently where LSP allows it: clients send more than we use (work-done
 * tokens, capabilities we did not ask for), so objects are plain `z.object` and unknown keys are
 * stripped. The fields we do read are checked strictly, types and bounds included.
 *
 * Positions follow LSP's default encoding: 0-based lines and characters counted in UTF-16 code
 * units, which is also how JavaScript strings index, so an offset into a document's text is one.
 */
import { z } from 'zod';

/** Most content changes one didChange may carry; editors send one per edit batch. */
export const MAX_CONTENT_CHANGES = 200;

/** LSP's `uinteger`: 0 to 2^31 - 1. */
const uinteger = z.int().min(0).max(2 ** 31 - 1);

/** A place in a document, between two characters. */
export const positionSchema = z.object({
  /** Line, 0-based. */
  line: uinteger,
  /**
   * Character offset in the line, 0-based, in UTF-16 code units (a character outside the BMP,
   * such as an emoji, counts 2). A value past the line's end means the end of the line.
   */
  character: uinteger,
});
export type Position = z.infer<typeof positionSchema>;

/** A span of a document; `end` is exclusive. */
export const rangeSchema = z.object({
  /** First position in the span. */
  start: positionSchema,
  /** Position just after the span. */
  end: positionSchema,
});
export type Range = z.infer<typeof rangeSchema>;

/** Diagnostic severities, as LSP numbers them. */
export const DiagnosticSeverity = { Error: 1, Warning: 2, Information: 3, Hint: 4 } as const;
export type DiagnosticSeverity = (typeof DiagnosticSeverity)[keyof typeof DiagnosticSeverity];

/** The `source` of every diagnostic the config language service sends. */
export const diagnosticSource = 'troupe';

/** The `code` of a config diagnostic: the kind of problem, for filtering and tests. */
export const DiagnosticCode = {
  /** The text is not JSON (VS Code's JSON language features report these too, so its client drops them). */
  Syntax: 'json-syntax',
  Config: 'config',
  Environment: 'environment',
  /** A path the config names: outside the workspace, or no model folder there. */
  Path: 'path',
  DuplicateKey: 'duplicate-key',
  Suspicious: 'suspicious',
  NoEffect: 'no-effect',
} as const;
export type DiagnosticCode = (typeof DiagnosticCode)[keyof typeof DiagnosticCode];

/** A problem in a document (LSP's Diagnostic without related information, tags or code links). */
export const diagnosticSchema = z.object({
  /** The text the problem is about. */
  range: rangeSchema,
  /** 1 error, 2 warning, 3 information, 4 hint. */
  severity: z.union([z.literal(1), z.literal(2), z.literal(3), z.literal(4)]),
  /** Who found the problem, shown beside the message (e.g. "troupe"). */
  source: z.string(),
  /** What is wrong, naming the culprit and what would be accepted. */
  message: z.string(),
  /** A stable kind of problem, for filtering (e.g. "json-syntax", "schema"). */
  code: z.union([z.int(), z.string()]).optional(),
});
export type Diagnostic = z.infer<typeof diagnosticSchema>;

/** A document as the client opens it. */
export const textDocumentItemSchema = z.object({
  /** The document's URI (e.g. `file:///work/configs/plan-path/L2-lora.json`). */
  uri: z.string().min(1),
  /** The client's language id (e.g. "json"). */
  languageId: z.string(),
  /** The document's version; it increases with every change. */
  version: z.int(),
  /** The whole text. */
  text: z.string(),
});

/** Names a document. */
export const textDocumentIdentifierSchema = z.object({
  /** The document's URI. */
  uri: z.string().min(1),
});

/** Names a document at a version. */
export const versionedTextDocumentIdentifierSchema = textDocumentIdentifierSchema.extend({
  /** The version the document has after the change it comes with. */
  version: z.int(),
});

/** `textDocument/didOpen`. */
export const didOpenTextDocumentParamsSchema = z.object({
  /** The opened document, with its text. */
  textDocument: textDocumentItemSchema,
});
export type DidOpenTextDocumentParams = z.infer<typeof didOpenTextDocumentParamsSchema>;

/** A change replacing `range` (in the document as it is before this change) with `text`. */
export const incrementalContentChangeSchema = z.object({
  /** The replaced span. */
  range: rangeSchema,
  /** Deprecated by LSP and ignored: the range is authoritative. */
  rangeLength: uinteger.optional(),
  /** The new text of the span. */
  text: z.string(),
});

/** A change replacing the whole document. */
export const fullContentChangeSchema = z.object({
  /**
   * Never present. Declared so that an incremental change whose range is malformed fails instead
   * of passing as a full change once its `range` were stripped as an unknown key: that would
   * replace the whole document with a fragment.
   */
  range: z.undefined().optional(),
  /** The new text of the whole document. */
  text: z.string(),
});

/** One content change: a span (`range` present) or the whole document. */
export const textDocumentContentChangeEventSchema = z.union([incrementalContentChangeSchema, fullContentChangeSchema]);
export type TextDocumentContentChangeEvent = z.infer<typeof textDocumentContentChangeEventSchema>;

/** `textDocument/didChange`. */
export const didChangeTextDocumentParamsSchema = z.object({
  /** The document and its version after all the changes. */
  textDocument: versionedTextDocumentIdentifierSchema,
  /** Changes in the order they apply; each one's range refers to the text the previous one left. */
  /**
   * The changes, applied in order. Capped: each change re-indexes the document, so an unbounded
   * list in one frame could hold the server's event loop for seconds.
   */
  contentChanges: z.array(textDocumentContentChangeEventSchema).max(MAX_CONTENT_CHANGES, `at most ${MAX_CONTENT_CHANGES} changes per notification`),
});
export type DidChangeTextDocumentParams = z.infer<typeof didChangeTextDocumentParamsSchema>;

/** `textDocument/didClose`. */
export const didCloseTextDocumentParamsSchema = z.object({
  /** The closed document. */
  textDocument: textDocumentIdentifierSchema,
});
export type DidCloseTextDocumentParams = z.infer<typeof didCloseTextDocumentParamsSchema>;

/** `textDocument/publishDiagnostics` (server to client): the full set for one document. */
export const publishDiagnosticsParamsSchema = z.object({
  /** The document the diagnostics are for. */
  uri: z.string().min(1),
  /** The version they were computed for, so a client can drop stale ones. */
  version: z.int().optional(),
  /** Every current diagnostic; an empty list clears them. */
  diagnostics: z.array(diagnosticSchema),
});

/** A position in a document. */
export const textDocumentPositionParamsSchema = z.object({
  /** The document. */
  textDocument: textDocumentIdentifierSchema,
  /** The position in it. */
  position: positionSchema,
});

/** How completion was triggered: 1 invoked (typing or Ctrl+Space), 2 a trigger character, 3 re-trigger of an incomplete list. */
export const CompletionTriggerKind = { Invoked: 1, TriggerCharacter: 2, TriggerForIncompleteCompletions: 3 } as const;

/** `textDocument/completion`. */
export const completionParamsSchema = textDocumentPositionParamsSchema.extend({
  /** How completion was triggered; absent when the client does not say. */
  context: z
    .object({
      /** See `CompletionTriggerKind`. */
      triggerKind: z.union([z.literal(1), z.literal(2), z.literal(3)]),
      /** The character typed, when `triggerKind` is 2. */
      triggerCharacter: z.string().optional(),
    })
    .optional(),
});

/** Formatted text: markdown or plain text. */
export const markupContentSchema = z.object({
  /** How `value` is rendered. */
  kind: z.enum(['markdown', 'plaintext']),
  /** The text. */
  value: z.string(),
});

/** The icons of completion items we use, numbered as LSP numbers them. */
export const CompletionItemKind = { Text: 1, Module: 9, Property: 10, Value: 12, Keyword: 14, Snippet: 15, Reference: 18, EnumMember: 20, Constant: 21 } as const;

/** Whether an insert text is plain or a snippet with `$1`-style tab stops. */
export const InsertTextFormat = { PlainText: 1, Snippet: 2 } as const;

/** A text edit: replace `range` with `newText`. */
export const textEditSchema = z.object({
  /** The replaced span. */
  range: rangeSchema,
  /** Its replacement. */
  newText: z.string(),
});

/** One completion proposal. */
export const completionItemSchema = z.object({
  /** What the list shows, and by default what is filtered on and inserted. */
  label: z.string(),
  /** The icon (see `CompletionItemKind`). */
  kind: z.int().min(1).max(25).optional(),
  /** One line beside the label: the type, or where the value comes from. */
  detail: z.string().optional(),
  /** The longer explanation shown beside the list. */
  documentation: markupContentSchema.optional(),
  /** Inserted text when there is no `textEdit`. */
  insertText: z.string().optional(),
  /** Whether `insertText` / `textEdit.newText` is a snippet (see `InsertTextFormat`). */
  insertTextFormat: z.union([z.literal(1), z.literal(2)]).optional(),
  /** The exact edit to apply; its range must contain the cursor and lie on one line. */
  textEdit: textEditSchema.optional(),
  /** Sort key; the label when absent. */
  sortText: z.string().optional(),
  /** Filter key; the label when absent. */
  filterText: z.string().optional(),
});
export type CompletionItem = z.infer<typeof completionItemSchema>;

/** The answer to `textDocument/completion`. */
export const completionListSchema = z.object({
  /** Whether typing more should ask again rather than filter this list. */
  isIncomplete: z.boolean(),
  /** The proposals. */
  items: z.array(completionItemSchema),
});
export type CompletionList = z.infer<typeof completionListSchema>;

/** `textDocument/hover`. */
export const hoverParamsSchema = textDocumentPositionParamsSchema;

/** The answer to `textDocument/hover` (or null when there is nothing to say). */
export const hoverSchema = z.object({
  /** What to show. */
  contents: markupContentSchema,
  /** The span the hover is about, highlighted by the client. */
  range: rangeSchema.optional(),
});
export type Hover = z.infer<typeof hoverSchema>;

/** How the client should send changes: the server accepts both full and incremental ones. */
export const TextDocumentSyncKind = { None: 0, Full: 1, Incremental: 2 } as const;
