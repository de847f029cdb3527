/**
 * LSP document features for experiment configs: the connection-facing half. Each client has its
 * own set of open documents (two editors may hold different versions of one file), and
 * diagnostics go only to the client that opened the document. The analysis itself is pure and
 * lives in server/config-language/; what needs the disk (the paths a config names, checked under
 * the server's path rule as a start checks them) is looked up here and handed to it.
 */
import { fileURLToPath } from 'node:url';
import { ConfigDocuments } from '../config-language/config-documents.ts';
import { ConfigLanguageService } from '../config-language/config-language-service.ts';
import type { ConfigIssue } from '../protocol/config-errors.ts';
import { ErrorCodes, RpcError } from '../protocol/json-rpc.ts';
import type { PathConfinement } from '../runs/path-confinement.ts';
import { configPathIssues } from '../runs/run-session.ts';
import type { Connection, NotificationHandlers, RequestHandlers } from './connection.ts';

type ConfigRequest = 'textDocument/completion' | 'textDocument/hover';
type ConfigNotification = 'textDocument/didOpen' | 'textDocument/didChange' | 'textDocument/didClose';

export interface ConfigHandlers {
  readonly requests: Pick<RequestHandlers, ConfigRequest>;
  readonly notifications: Pick<NotificationHandlers, ConfigNotification>;
}

export function configHandlers(o: { readonly log: (line: string) => void; readonly paths?: PathConfinement }): ConfigHandlers {
  const service = new ConfigLanguageService();
  const perClient = new WeakMap<Connection, ConfigDocuments>();
  const docsOf = (c: Connection): ConfigDocuments => {
    let d = perClient.get(c);
    if (!d) perClient.set(c, (d = new ConfigDocuments()));
    return d;
  };
  const openDoc = (c: Connection, uri: string) => {
    const doc = docsOf(c).get(uri);
    if (!doc) throw new RpcError(ErrorCodes.NotFound, `document ${uri} is not open: send textDocument/didOpen first`);
    return doc;
  };
  // The paths of a valid config in a file on disk; relative ones mean the file's folder.
  const pathIssues = async (uri: string, text: string): Promise<ConfigIssue[]> => {
    const config = o.paths === undefined || !uri.startsWith('file:') ? undefined : service.config(text);
    if (config === undefined || o.paths === undefined) return [];
    return configPathIssues(config, fileURLToPath(uri), o.paths, { readModels: true });
  };
  // Published once the paths are checked, and only if the document is still at that version: a
  // later edit's diagnostics must not be overwritten by an earlier one's that finished last.
  const publish = (c: Connection, uri: string, version: number, text: string) => {
    pathIssues(uri, text)
      .catch((e: unknown) => {
        o.log(`client ${c.id}: checking the paths of ${uri}: ${e instanceof Error ? e.message : String(e)}`);
        return [];
      })
      .then((issues) => {
        if (docsOf(c).get(uri)?.version !== version) return;
        c.notify('textDocument/publishDiagnostics', { uri, version, diagnostics: service.diagnose(text, issues) });
      })
      .catch((e: unknown) => o.log(`client ${c.id}: diagnostics of ${uri}: ${e instanceof Error ? e.message : String(e)}`));
  };
  // A notification has no reply to carry an error, so a change the documents refuse (unknown
  // document, stale version) is logged; the client resyncs by reopening the document.
  const guarded = (what: string, c: Connection, body: () => void) => {
    try {
      body();
    } catch (e) {
      o.log(`client ${c.id}: ${what}: ${e instanceof Error ? e.message : String(e)}`);
    }
  };
  return {
    requests: {
      'textDocument/completion': (p, ctx) => service.complete(openDoc(ctx.connection, p.textDocument.uri).text, p.position),
      'textDocument/hover': (p, ctx) => service.hover(openDoc(ctx.connection, p.textDocument.uri).text, p.position),
    },
    notifications: {
      'textDocument/didOpen': (p, c) =>
        guarded('didOpen', c, () => {
          const doc = docsOf(c).open(p);
          publish(c, doc.uri, doc.version, doc.text);
        }),
      'textDocument/didChange': (p, c) =>
        guarded('didChange', c, () => {
          const doc = docsOf(c).change(p);
          publish(c, doc.uri, doc.version, doc.text);
        }),
      'textDocument/didClose': (p, c) =>
        guarded('didClose', c, () => {
          docsOf(c).close(p);
          // Clearing is the client's job in LSP, but an empty set makes stale markers impossible.
          c.notify('textDocument/publishDiagnostics', { uri: p.textDocument.uri, diagnostics: [] });
        }),
    },
  };
}
