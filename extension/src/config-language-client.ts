/**
 * Config editing through the server: a `vscode-languageclient` LanguageClient for experiment
 * configs (diagnostics with exact ranges, completion, hover), speaking LSP over a WebSocket of its
 * own to the training server. Its lifetime follows the main connection: it starts when the server
 * connects and stops when it drops, instead of restarting on its own against a server that is gone.
 * Until the server is up, the JSON Schema contributed in the manifest validates configs; while the
 * client runs, that schema is an empty one (config-schema-provider.ts), so nothing is said twice.
 * VS Code's JSON language features still report JSON syntax errors and duplicate keys, so the
 * server's are dropped; in a config with its own `$schema` they also check that schema, and the
 * server's copies of what they report are dropped too (schema-echoes.ts).
 */
import * as vscode from 'vscode';
import {
  AbstractMessageReader,
  AbstractMessageWriter,
  CloseAction,
  ErrorAction,
  LanguageClient,
  RevealOutputChannelOn,
  State,
  type DataCallback,
  type Disposable,
  type LanguageClientOptions,
  type Message,
  type MessageReader,
  type MessageTransports,
  type MessageWriter,
} from 'vscode-languageclient/node.js';
import type { WebSocket } from 'ws';
import { DiagnosticCode, diagnosticSource } from '../../server/protocol/lsp.ts';
import { configFileGlobs, isExperimentConfigPath } from './config-files.ts';
import { classifyLanguageFrame } from './lsp-frames.ts';
import { withoutSchemaEchoes } from './schema-echoes.ts';
import { openServerSocket, rawDataToText, type ServerConnection } from './server-connection.ts';

/** Reads LSP messages from WebSocket text frames (one message per frame, no Content-Length headers). */
class WebSocketMessageReader extends AbstractMessageReader implements MessageReader {
  private callback: DataCallback | undefined;
  /** Messages that arrive before the client listens. */
  private readonly early: Message[] = [];

  constructor(socket: WebSocket, log: (line: string) => void) {
    super();
    socket.on('message', (data, isBinary) => {
      if (isBinary) return;
      const verdict = classifyLanguageFrame(rawDataToText(data));
      if (verdict.kind === 'drop') {
        if (!verdict.reason.includes('is not for the language client')) log(`language client: dropped a frame: ${verdict.reason}`);
        return;
      }
      // Checked by classifyLanguageFrame against the JSON-RPC envelope schemas.
      const message = verdict.message as unknown as Message;
      if (this.callback) this.callback(message);
      else this.early.push(message);
    });
    socket.on('error', (e) => this.fireError(e));
    socket.on('close', () => this.fireClose());
  }

  listen(callback: DataCallback): Disposable {
    this.callback = callback;
    for (const m of this.early.splice(0)) callback(m);
    return { dispose: () => (this.callback = this.callback === callback ? undefined : this.callback) };
  }
}

/** Writes each LSP message as one WebSocket text frame. */
class WebSocketMessageWriter extends AbstractMessageWriter implements MessageWriter {
  private errors = 0;

  constructor(private readonly socket: WebSocket) {
    super();
  }

  write(message: Message): Promise<void> {
    return new Promise((resolve, reject) => {
      const failed = (e: Error) => {
        this.fireError(e, message, ++this.errors);
        reject(e);
      };
      if (this.socket.readyState !== this.socket.OPEN) {
        failed(new Error('the language client socket is closed'));
        return;
      }
      this.socket.send(JSON.stringify(message), (e) => {
        if (e) failed(e);
        else {
          this.errors = 0;
          resolve();
        }
      });
    });
  }

  end(): void {
    this.socket.close(1000);
  }
}

const isConfig = (document: vscode.TextDocument) => isExperimentConfigPath(document.uri.path);

/** The server's diagnostics that VS Code's JSON language features make for any JSON file too. */
const jsonLanguageCodes: ReadonlySet<unknown> = new Set([DiagnosticCode.Syntax, DiagnosticCode.DuplicateKey]);

/** Whether VS Code says this already: a JSON syntax error or a duplicate key the server found. */
export function saidByJsonLanguage(d: { readonly source?: string | undefined; readonly code?: unknown }): boolean {
  const code = typeof d.code === 'object' && d.code !== null && 'value' in d.code ? d.code.value : d.code;
  return d.source === diagnosticSource && jsonLanguageCodes.has(code);
}

/**
 * The server's diagnostics per document as they came, and what was shown of them: a config with a
 * `$schema` is also checked by VS Code against that schema, and the server's copies of what that
 * check reports are dropped (schema-echoes.ts), again whenever VS Code's diagnostics change.
 */
class ShownDiagnostics {
  private readonly received = new Map<string, vscode.Diagnostic[]>();
  private readonly shown = new Map<string, vscode.Diagnostic[]>();

  /** What to show of the server's diagnostics for `uri` now. */
  receive(uri: vscode.Uri, diagnostics: readonly vscode.Diagnostic[]): vscode.Diagnostic[] {
    const fromServer = diagnostics.filter((d) => !saidByJsonLanguage(d));
    if (fromServer.length === 0) this.received.delete(uri.toString());
    else this.received.set(uri.toString(), fromServer);
    return this.filter(uri);
  }

  /** The documents whose shown diagnostics change now that VS Code's changed, with what to show. */
  *changed(uris: readonly vscode.Uri[]): Generator<[vscode.Uri, vscode.Diagnostic[]]> {
    for (const uri of uris) {
      const before = this.shown.get(uri.toString());
      if (!this.received.has(uri.toString()) || before === undefined) continue;
      const now = this.filter(uri);
      if (now.length !== before.length || now.some((d, i) => d !== before[i])) yield [uri, now];
    }
  }

  private filter(uri: vscode.Uri): vscode.Diagnostic[] {
    const shown = withoutSchemaEchoes(this.received.get(uri.toString()) ?? [], vscode.languages.getDiagnostics(uri));
    this.shown.set(uri.toString(), shown);
    return shown;
  }
}

/** Options for config documents; the middleware keeps `configs/schema.json` (matched by the globs) out. */
function clientOptions(output: vscode.OutputChannel, shown: ShownDiagnostics): LanguageClientOptions {
  return {
    documentSelector: configFileGlobs.map((pattern) => ({ scheme: 'file', pattern })),
    outputChannel: output,
    middleware: {
      didOpen: (document, next) => (isConfig(document) ? next(document) : Promise.resolve()),
      didChange: (event, next) => (isConfig(event.document) ? next(event) : Promise.resolve()),
      didClose: (document, next) => (isConfig(document) ? next(document) : Promise.resolve()),
      provideCompletionItem: (document, position, context, token, next) => (isConfig(document) ? next(document, position, context, token) : undefined),
      provideHover: (document, position, token, next) => (isConfig(document) ? next(document, position, token) : undefined),
      // Config files are JSON files: VS Code's JSON language features report their syntax errors
      // and duplicate keys whatever schema they use, and check them against their own `$schema`.
      handleDiagnostics: (uri, diagnostics, next) => next(uri, shown.receive(uri, diagnostics)),
    },
    // The connection decides when to come back (see ConfigLanguageClient); a close is expected
    // whenever the server goes, so it is not reported as an error. Nor are the write errors that
    // follow it (the client's `shutdown` on a socket the server's death closed): unhandled, the
    // library pops up "connection to server is erroring" beside the extension's own notice, which
    // has the Restart button. Both go to the output channel.
    errorHandler: {
      error: () => ({ action: ErrorAction.Continue, handled: true }),
      closed: () => ({ action: CloseAction.DoNotRestart, handled: true }),
    },
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    initializationFailedHandler: () => false,
  };
}

export class ConfigLanguageClient implements vscode.Disposable {
  private readonly client: LanguageClient;
  /** Starts and stops run one at a time, in the order the connection changed. */
  private queue: Promise<void> = Promise.resolve();
  private readonly subscription: vscode.Disposable;
  private readonly jsonDiagnostics: vscode.Disposable;
  private readonly running = new vscode.EventEmitter<boolean>();
  /** Fires true when the client runs (the server checks configs), false when it stops. */
  readonly onDidChangeRunning = this.running.event;

  constructor(
    private readonly server: ServerConnection,
    output: vscode.OutputChannel,
    private readonly log: (line: string) => void,
  ) {
    const serverOptions = async (): Promise<MessageTransports> => {
      const endpoint = server.endpoint;
      if (!endpoint) throw new Error('the Troupe server is not connected');
      const socket = await openServerSocket(endpoint);
      return { reader: new WebSocketMessageReader(socket, log), writer: new WebSocketMessageWriter(socket), detached: false };
    };
    const shown = new ShownDiagnostics();
    this.client = new LanguageClient('troupe.config', 'Troupe Config', serverOptions, clientOptions(output, shown));
    // VS Code's check of a `$schema` may come before or after the server's diagnostics.
    this.jsonDiagnostics = vscode.languages.onDidChangeDiagnostics((e) => {
      try {
        for (const [uri, diagnostics] of shown.changed(e.uris)) this.client.diagnostics?.set(uri, diagnostics);
      } catch (error) {
        // The client stopped meanwhile (its collection is disposed): its diagnostics went with it.
        log(`config language client: ${error instanceof Error ? error.message : String(error)}`);
      }
    });
    this.client.onDidChangeState((e) => {
      if (e.newState === State.Running) this.running.fire(true);
      else if (e.oldState === State.Running) this.running.fire(false);
    });
    this.subscription = server.onDidChangeConnection((c) => this.enqueue(c ? () => this.restart() : () => this.stop()));
    if (server.client) this.enqueue(() => this.restart());
  }

  /** Stops the client (sending `shutdown`/`exit` if it still runs). */
  stop(): Promise<void> {
    return this.client.state === State.Stopped ? Promise.resolve() : this.client.stop(2000);
  }

  dispose(): void {
    this.subscription.dispose();
    this.jsonDiagnostics.dispose();
    this.running.dispose();
    void this.client.dispose(2000).catch(() => {});
  }

  private enqueue(task: () => Promise<void>): void {
    this.queue = this.queue.then(task).catch((e: unknown) => this.log(`config language client: ${e instanceof Error ? e.message : String(e)}`));
  }

  private async restart(): Promise<void> {
    if (this.client.state !== State.Stopped) await this.client.stop(2000).catch(() => {});
    if (!this.server.endpoint) return;
    await this.client.start();
  }
}
