/**
 * The JSON Schema that VS Code's JSON language features check configs with (the manifest's
 * `jsonValidation` names it by a `troupe-schema://` address, which this provider serves), so that
 * it can follow the server. While the config language client runs, the server's diagnostics,
 * completion and hover say all the schema says and more (environments, routing, paths, model ids),
 * and the schema served is an empty one: each mistake is reported once, each completion offered
 * once and each hover written once. In an untrusted workspace, where no server starts, and once a
 * server has gone, it is the full schema.
 *
 * In a trusted workspace the empty schema is served from the start, before the server is up: VS
 * Code's JSON language features take a changed schema for documents opened later, but do not
 * reliably check an open document again (seen in the e2e test: the schema's diagnostics stayed
 * after the switch), so the common case must not depend on a switch.
 *
 * A config with its own `$schema` line is checked by VS Code against that schema whatever this
 * provider serves (a `$schema` wins over associations).
 */
import * as vscode from 'vscode';
import { configSchemaUrl } from './contributions.ts';

/** The empty schema served while the server checks configs: JSON syntax is still VS Code's to report. */
export const deferringSchemaText = `${JSON.stringify(
  { $comment: 'The Troupe server checks this file (diagnostics, completion, hover); VS Code checks only its JSON syntax meanwhile.' },
  null,
  2,
)}\n`;

/** What the schema address serves: the full schema, or the empty one while the server checks configs. */
export function servedSchemaText(fullSchema: string, serverChecks: boolean): string {
  return serverChecks ? deferringSchemaText : fullSchema;
}

export class ConfigSchemaProvider implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private serverChecks: boolean;
  private fullSchema: Promise<string> | undefined;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly log: (line: string) => void,
  ) {
    // A trusted workspace starts (or joins) its server; an untrusted one never does.
    this.serverChecks = vscode.workspace.isTrusted;
  }

  /** Says whether the server checks configs now; VS Code's JSON language features reload the schema. */
  setServerChecks(serverChecks: boolean): void {
    if (serverChecks === this.serverChecks) return;
    this.serverChecks = serverChecks;
    this.log(serverChecks ? 'config schema: the server checks configs; VS Code\'s JSON schema check steps back' : 'config schema: the full JSON Schema checks configs until the server is back');
    this.changed.fire(vscode.Uri.parse(configSchemaUrl));
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    if (uri.toString() !== vscode.Uri.parse(configSchemaUrl).toString()) throw new Error(`no Troupe schema at ${uri.toString()}`);
    // The schema the build copies beside the bundle (extension/esbuild.mjs).
    this.fullSchema ??= Promise.resolve(vscode.workspace.fs.readFile(vscode.Uri.joinPath(this.extensionUri, 'schema', 'experiment-config.schema.json'))).then((bytes) =>
      new TextDecoder().decode(bytes),
    );
    this.log(`config schema: served the ${this.serverChecks ? 'empty' : 'full'} schema`);
    return servedSchemaText(await this.fullSchema, this.serverChecks);
  }

  dispose(): void {
    this.changed.dispose();
  }
}
