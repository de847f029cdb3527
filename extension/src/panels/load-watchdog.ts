/**
 * Reloads a webview panel's page when it does not start. In VS Code for the Web (code-server) the
 * webview service worker sometimes fails to serve a page's files, most often for a panel restored
 * by a window reload: the requests escape to the placeholder host `vscode-cdn.net` and the panel
 * stays blank (microsoft/vscode#326544, seen in this repository's end-to-end test of a reload).
 * Each of Troupe's pages posts `ready` once its script runs; a page that is in view and has not
 * said so within `timeoutMs` is loaded again, up to `retries` times, after which `giveUp` tells
 * the user. A panel out of view has no page (`retainContextWhenHidden` is off), so the clock runs
 * only while the panel is visible, and a page shown again is waited for anew.
 */
export interface LoadWatchdogHost {
  /** Whether the panel is in view now. */
  visible(): boolean;
  /** Loads the page again (new HTML: VS Code replaces the page only when its HTML changes). */
  reload(attempt: number): void;
  /** Called once, when the last reload did not start either. */
  giveUp(loads: number): void;
}

export class LoadWatchdog {
  #ready = false;
  #reloads = 0;
  #gaveUp = false;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly host: LoadWatchdogHost,
    private readonly timeoutMs: number,
    private readonly retries: number,
  ) {}

  /** The page was (re)loaded: wait for its `ready`. */
  loaded(): void {
    this.#ready = false;
    this.#arm();
  }

  /** The page posted `ready`. A later load (after the panel was hidden) gets its own reloads. */
  ready(): void {
    this.#ready = true;
    this.#reloads = 0;
    this.#clear();
  }

  /** The panel came into view or left it. */
  viewChanged(): void {
    if (!this.host.visible()) {
      // Out of view the page is gone; shown again, it loads again and must say `ready` again.
      this.#ready = false;
      this.#clear();
    } else if (!this.#ready) {
      this.#arm();
    }
  }

  dispose(): void {
    this.#clear();
  }

  #arm(): void {
    this.#clear();
    if (this.#gaveUp || !this.host.visible()) return;
    this.#timer = setTimeout(() => this.#check(), this.timeoutMs);
  }

  #check(): void {
    this.#timer = undefined;
    if (this.#ready || !this.host.visible()) return;
    if (this.#reloads < this.retries) {
      this.#reloads++;
      this.host.reload(this.#reloads);
      this.#arm();
    } else {
      this.#gaveUp = true;
      this.host.giveUp(this.#reloads + 1);
    }
  }

  #clear(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
