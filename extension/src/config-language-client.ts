/**
 * Config editing through the server: a `vscode-languageclient` LanguageClient for experiment
 * configs (diagnostics with exact ranges, completion, hover), speaking LSP over a WebSocket of its
 * own to the training server. Its lifetime follows the main connection: it starts when the server
 * connects and stops when it drops, instead of restarting on its own against a server that is gone.
 * Until the server is up, the JSON Schema contributed in the manifest validates configs; while the
 * client runs, that schema is an empty one (config-schema-provider.ts), so nothing is said twice.
 * VS Code's JSON language features still report JSON syntax errors and duplicate keys, so the
 * server's are dropped.
 */
import * as vscode from 'vscode';
import {
  AbstractMessageReader,
  AbstractMessageWriter,
  CloseAction,
  ErrorAction,
  LanguageClient,
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

/** Options for config documents; the middleware keeps `configs/schema.json` (matched by the globs) out. */
function clientOptions(output: vscode.OutputChannel): LanguageClientOptions {
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
      // and duplicate keys whatever schema they use.
      handleDiagnostics: (uri, diagnostics, next) => next(uri, diagnostics.filter((d) => !saidByJsonLanguage(d))),
    },
    // The connection decides when to come back (see ConfigLanguageClient); a close is expected
    // whenever the server goes, so it is not reported as an error.
    errorHandler: {
      error: () => ({ action: ErrorAction.Continue }),
      closed: () => ({ action: CloseAction.DoNotRestart, handled: true }),
    },
    initializationFailedHandler: () => false,
  };
}

export class ConfigLanguageClient implements vscode.Disposable {
  private readonly client: LanguageClient;
  /** Starts and stops run one at a time, in the order the connection changed. */
  private queue: Promise<void> = Promise.resolve();
  private readonly subscription: vscode.Disposable;
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
    this.client = new LanguageClient('troupe.config', 'Troupe Config', serverOptions, clientOptions(output));
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
