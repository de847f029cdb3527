/**
 * Offsets ⇄ LSP positions for one text. LSP counts characters in UTF-16 code units, which is how
 * JavaScript strings index, so no re-encoding is needed; what needs care is line breaks (LSP
 * accepts \n, \r\n and \r) and out-of-range positions, which LSP says to clamp rather than reject.
 */
import type { Position, Range } from '../protocol/lsp.ts';

export class LineIndex {
  /** Offset at which each line starts; the first is 0. */
  private readonly starts: number[];

  constructor(readonly text: string) {
    this.starts = [0];
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      // \r\n is one break: the line starts after the \n.
      if (c === 13 /* \r */ && text.charCodeAt(i + 1) === 10) i++;
      if (c === 13 || c === 10) this.starts.push(i + 1);
    }
  }

  get lineCount(): number {
    return this.starts.length;
  }

  /** The position of an offset (clamped to [0, text.length]). */
  positionAt(offset: number): Position {
    const o = Math.max(0, Math.min(Math.floor(offset), this.text.length));
    // The last line whose start is <= o.
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid]! <= o) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo, character: o - this.starts[lo]! };
  }

  /**
   * The offset of a position. A line past the end means the end of the text; a character past the
   * line's end means the end of that line (before its line break), as LSP specifies.
   */
  offsetAt(position: Position): number {
    if (position.line >= this.starts.length) return this.text.length;
    const start = this.starts[position.line]!;
    return Math.min(start + Math.max(0, position.character), this.lineContentEnd(position.line));
  }

  /** The range covering [start, end). */
  rangeOf(start: number, end: number): Range {
    return { start: this.positionAt(start), end: this.positionAt(end) };
  }

  /** Offset just before the line break that ends `line` (or the text's end for the last line). */
  private lineContentEnd(line: number): number {
    const next = this.starts[line + 1];
    if (next === undefined) return this.text.length;
    let end = next;
    if (end > 0 && this.text.charCodeAt(end - 1) === 10) end--;
    if (end > 0 && this.text.charCodeAt(end - 1) === 13) end--;
    return Math.max(end, this.starts[line]!);
  }
}
