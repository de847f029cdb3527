/**
 * Language features for experiment config files (ARCHITECTURE.md, `server/config-language`), independent of any transport:
 * the server's LSP handlers pass a document's text (from `ConfigDocuments`) and a position, and
 * send back what these return. Text in, LSP shapes out; nothing here does I/O.
 *
 * The last text parsed is kept, since a client usually asks for diagnostics, completion and hover
 * on the same version in a row.
 */
import type { ConfigIssue } from '../protocol/config-errors.ts';
import { safeParseExperimentConfig, type ExperimentConfig } from '../protocol/experiment-config.ts';
import type { CompletionList, Diagnostic, Hover, Position } from '../protocol/lsp.ts';
import { completeConfig } from './config-completion.ts';
import { diagnoseConfig } from './config-diagnostics.ts';
import { hoverConfig } from './config-hover.ts';
import { ParsedConfig } from './parsed-config.ts';

export class ConfigLanguageService {
  private last: ParsedConfig | undefined;

  /**
   * Every problem in the text: syntax, schema, cross-field rules, environment, the `pathIssues`
   * its caller found on disk; then warnings.
   */
  diagnose(text: string, pathIssues: readonly ConfigIssue[] = []): Diagnostic[] {
    return diagnoseConfig(this.parse(text), pathIssues);
  }

  /** The valid config the text holds, or undefined (syntax or schema errors). */
  config(text: string): ExperimentConfig | undefined {
    const doc = this.parse(text);
    if (!doc.value.ok) return undefined;
    const parsed = safeParseExperimentConfig(doc.value.json);
    return parsed.success ? parsed.config : undefined;
  }

  /** Completion proposals at `position` (0-based line, UTF-16 character). */
  complete(text: string, position: Position): CompletionList {
    return completeConfig(this.parse(text), position);
  }

  /** Documentation of the property or value at `position`, or null. */
  hover(text: string, position: Position): Hover | null {
    return hoverConfig(this.parse(text), position);
  }

  private parse(text: string): ParsedConfig {
    if (this.last?.text !== text) this.last = new ParsedConfig(text);
    return this.last;
  }
}
