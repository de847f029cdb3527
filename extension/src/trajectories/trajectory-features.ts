/**
 * Trajectory documents in the editor: the `troupe:` content provider, inline reward annotations
 * (a decoration after each turn's `  reward` line, a hover with the full breakdown on it and on
 * the rule, an "Inspect branches" CodeLens), each program's time after its header (with a hover on how it ended; the time is not
 * in the text, so diffs of the same program stay clean), and the two entry points the commands
 * call: open one trajectory, diff two.
 *
 * The rendering and the annotation positions are pure (trajectory-document.ts); this file only
 * fetches, caches and hands them to VS Code.
 */
import * as vscode from 'vscode';
import type { TrajectoryDetail } from '../../../server/protocol/trajectory.ts';
import { whenConnected, type ServerClient } from '../server-client.ts';
import {
  annotationHoverMarkdown,
  annotationLabel,
  annotationSign,
  executionAtHeaderLine,
  executionHoverMarkdown,
  executionLabel,
  renderTrajectory,
  turnAtHeaderLine,
  type ExecutionAnnotation,
  type RenderedTrajectory,
  type TurnAnnotation,
} from './trajectory-document.ts';
import { TROUPE_SCHEME, parseTrajectoryUri, trajectoryUriPath } from './trajectory-uri.ts';

/** The trajectory inspector webview's command (registered elsewhere); takes a trajectory id. */
const INSPECT_COMMAND = 'troupe.openTrajectory';
/**
 * Trajectories fetched and kept. A detail with its sibling branches is a few hundred KB at most;
 * 64 covers every document a person has open plus the ones just compared, without growing forever.
 */
const DETAIL_CACHE_LIMIT = 64;

export interface TrajectoryFeatures {
  /** Opens the trajectory as a read-only document in a preview tab (browsing reuses it). Rejects if it cannot be fetched. */
  openTrajectory(trajectoryId: number): Promise<void>;
  /** Opens `vscode.diff` on two trajectories (a on the left). Rejects if either cannot be fetched. */
  compareTrajectories(a: number, b: number): Promise<void>;
}

export function registerTrajectoryFeatures(context: vscode.ExtensionContext, server: ServerClient): TrajectoryFeatures {
  const details = new DetailCache(server);
  const runNames = new Map<string, Promise<string>>();
  /**
   * The rendering behind each open document, by URI. Annotations are read from here rather than
   * re-rendered from the cache, so they always match the text VS Code holds even if the cache was
   * cleared or refetched since.
   */
  const rendered = new Map<string, RenderedTrajectory>();
  const selector: vscode.DocumentSelector = { scheme: TROUPE_SCHEME };

  const decorations = {
    positive: annotationType('charts.green'),
    negative: annotationType('charts.red'),
    zero: annotationType('descriptionForeground'),
  } as const;

  const decorate = (editor: vscode.TextEditor) => {
    const r = rendered.get(editor.document.uri.toString());
    if (editor.document.uri.scheme !== TROUPE_SCHEME || r === undefined) return;
    const bySign: Record<keyof typeof decorations, vscode.DecorationOptions[]> = { positive: [], negative: [], zero: [] };
    for (const turn of r.turns) {
      if (turn.rewardLine >= editor.document.lineCount) continue;
      const end = editor.document.lineAt(turn.rewardLine).range.end;
      bySign[annotationSign(turn)].push({
        range: new vscode.Range(end, end),
        renderOptions: { after: { contentText: annotationLabel(turn) } },
      });
      for (const program of turn.executions) {
        if (program.headerLine >= editor.document.lineCount) continue;
        const at = editor.document.lineAt(program.headerLine).range.end;
        bySign.zero.push({ range: new vscode.Range(at, at), renderOptions: { after: { contentText: executionLabel(program) } } });
      }
    }
    for (const sign of ['positive', 'negative', 'zero'] as const) editor.setDecorations(decorations[sign], bySign[sign]);
  };

  const contentChanges = new vscode.EventEmitter<vscode.Uri>();
  const provider: vscode.TextDocumentContentProvider = {
    onDidChange: contentChanges.event,
    async provideTextDocumentContent(uri) {
      const { trajectoryId } = parseTrajectoryUri(uri);
      let r: RenderedTrajectory;
      try {
        r = renderTrajectory(await details.get(trajectoryId));
      } catch (e) {
        // Text rather than a rejection: a rejected tab (one restored while no server came up) is an
        // error page with no document, which the next connection could not refresh.
        rendered.delete(uri.toString());
        return `Troupe could not read trajectory ${trajectoryId}: ${e instanceof Error ? e.message : String(e)}\nThis document reloads when a server connects.\n`;
      }
      // Stored before VS Code creates the document, so the editor that then becomes visible (and
      // fires onDidChangeVisibleTextEditors) finds its annotations.
      rendered.set(uri.toString(), r);
      return r.text;
    },
  };

  const hovers: vscode.HoverProvider = {
    provideHover(document, position) {
      const program = programAt(document, position.line);
      if (program !== undefined) return new vscode.Hover(new vscode.MarkdownString(executionHoverMarkdown(program)), document.lineAt(position.line).range);
      const turn = turnAt(document, position.line);
      if (turn === undefined) return undefined;
      // Not trusted and no command links: the text includes agent ids and parse errors from the run.
      const md = new vscode.MarkdownString(annotationHoverMarkdown(turn));
      return new vscode.Hover(md, document.lineAt(position.line).range);
    },
  };

  const lenses: vscode.CodeLensProvider = {
    provideCodeLenses(document) {
      const r = rendered.get(document.uri.toString());
      if (r === undefined) return [];
      const { trajectoryId } = parseTrajectoryUri(document.uri);
      return r.turns.map((turn) => new vscode.CodeLens(new vscode.Range(turn.headerLine, 0, turn.headerLine, 0), {
        title: turn.k > 1 ? `Inspect ${turn.k} branches` : 'Inspect branches',
        tooltip: `Open trajectory ${trajectoryId} in the inspector (turn ${turn.turn}, ${turn.agentId})`,
        command: INSPECT_COMMAND,
        arguments: [trajectoryId],
      }));
    },
  };

  function turnAt(document: vscode.TextDocument, line: number): TurnAnnotation | undefined {
    const r = rendered.get(document.uri.toString());
    return r === undefined ? undefined : turnAtHeaderLine(r, line);
  }

  function programAt(document: vscode.TextDocument, line: number): ExecutionAnnotation | undefined {
    const r = rendered.get(document.uri.toString());
    return r === undefined ? undefined : executionAtHeaderLine(r, line);
  }

  /** The run's name for the URI's run segment; the id when the name cannot be read (cosmetic only). */
  function runName(runId: string): Promise<string> {
    let name = runNames.get(runId);
    if (name === undefined) {
      name = (async () => (await (await whenConnected(server)).request('run/get', { runId })).run.name || runId)().catch(() => runId);
      runNames.set(runId, name);
    }
    return name;
  }

  async function uriOf(detail: TrajectoryDetail): Promise<vscode.Uri> {
    const t = detail.trajectory;
    const path = trajectoryUriPath({ trajectoryId: t.id, run: await runName(t.runId), step: t.step });
    return vscode.Uri.from({ scheme: TROUPE_SCHEME, path });
  }

  context.subscriptions.push(
    vscode.workspace.registerTextDocumentContentProvider(TROUPE_SCHEME, provider),
    vscode.languages.registerHoverProvider(selector, hovers),
    vscode.languages.registerCodeLensProvider(selector, lenses),
    // Both sides of a diff editor are visible text editors, so this covers compare views too.
    vscode.window.onDidChangeVisibleTextEditors((editors) => editors.forEach(decorate)),
    vscode.workspace.onDidCloseTextDocument((doc) => rendered.delete(doc.uri.toString())),
    // Trajectory ids are stable only within one server's database: a new connection may be another
    // workspace's server, so nothing fetched before it can be trusted. Open documents keep their
    // text, except those that could not be read (no rendering): they ask again.
    server.onDidChangeConnection((client) => {
      details.clear();
      runNames.clear();
      if (client === undefined) return;
      for (const doc of vscode.workspace.textDocuments) {
        if (doc.uri.scheme === TROUPE_SCHEME && !rendered.has(doc.uri.toString())) contentChanges.fire(doc.uri);
      }
    }),
    contentChanges,
    ...Object.values(decorations),
  );

  return {
    async openTrajectory(trajectoryId) {
      const uri = await uriOf(await details.get(trajectoryId));
      const document = await vscode.workspace.openTextDocument(uri);
      await vscode.window.showTextDocument(document, { preview: true });
    },
    async compareTrajectories(a, b) {
      const [left, right] = await Promise.all([details.get(a), details.get(b)]);
      const [leftUri, rightUri] = await Promise.all([uriOf(left), uriOf(right)]);
      const title = `trajectory ${a} (step ${left.trajectory.step}) ↔ trajectory ${b} (step ${right.trajectory.step})`;
      await vscode.commands.executeCommand('vscode.diff', leftUri, rightUri, title, { preview: false });
    },
  };
}

/** An after-line annotation in a theme colour; the text is set per turn. */
function annotationType(color: string): vscode.TextEditorDecorationType {
  return vscode.window.createTextEditorDecorationType({
    after: { color: new vscode.ThemeColor(color), margin: '0 0 0 1em', fontStyle: 'italic' },
  });
}

/**
 * Trajectory details by id, least recently used first out. Committed trajectories never change, so
 * an entry is valid until the connection changes; a failed fetch is dropped so the next open retries.
 */
class DetailCache {
  private readonly entries = new Map<number, Promise<TrajectoryDetail>>();

  constructor(private readonly server: ServerClient) {}

  get(trajectoryId: number): Promise<TrajectoryDetail> {
    const hit = this.entries.get(trajectoryId);
    if (hit !== undefined) {
      this.entries.delete(trajectoryId); // re-insert: Map order is the recency order
      this.entries.set(trajectoryId, hit);
      return hit;
    }
    // Waits for the first connection: after a window reload, restored tabs ask before it is made.
    const fetched = (async () => (await (await whenConnected(this.server)).request('trajectory/get', { trajectoryId })).trajectory)();
    fetched.catch(() => {
      if (this.entries.get(trajectoryId) === fetched) this.entries.delete(trajectoryId);
    });
    this.entries.set(trajectoryId, fetched);
    for (const oldest of this.entries.keys()) {
      if (this.entries.size <= DETAIL_CACHE_LIMIT) break;
      this.entries.delete(oldest);
    }
    return fetched;
  }

  clear(): void {
    this.entries.clear();
  }
}
