/**
 * Chart colours from VS Code's theme. uPlot draws on a canvas, which cannot read CSS variables, so
 * the variables are resolved to concrete colours here, and again whenever the theme changes (VS Code
 * rewrites the variables on <html> and the theme class on <body>).
 */

export interface ChartTheme {
  readonly foreground: string;
  readonly muted: string;
  readonly grid: string;
  readonly font: string;
  /** One colour per scope (agent/policy), in scope order. */
  readonly palette: readonly string[];
  /** Same colour with an alpha, for stacked bands. */
  fill(color: string, alpha: number): string;
}

const PALETTE_VARS = ['--vscode-charts-blue', '--vscode-charts-orange', '--vscode-charts-green', '--vscode-charts-purple', '--vscode-charts-red', '--vscode-charts-yellow'];
// Used when a variable is missing (a page opened outside VS Code, a theme that leaves it out).
const PALETTE_FALLBACK = ['#3794ff', '#d18616', '#89d185', '#b180d7', '#f14c4c', '#cca700'];

/** Resolves any CSS colour (named, hex, var-provided) to `rgb(...)`/`rgba(...)` through a probe element. */
function resolveColor(probe: HTMLElement, value: string, fallback: string): string {
  probe.style.color = '';
  probe.style.color = value.trim() || fallback;
  return getComputedStyle(probe).color || fallback;
}

export function readTheme(): ChartTheme {
  const css = getComputedStyle(document.documentElement);
  const v = (name: string) => css.getPropertyValue(name);
  const probe = document.createElement('span');
  probe.hidden = true;
  document.body.append(probe);
  try {
    const foreground = resolveColor(probe, v('--vscode-editor-foreground') || v('--vscode-foreground'), '#cccccc');
    const muted = resolveColor(probe, v('--vscode-descriptionForeground'), foreground);
    const gridBase = resolveColor(probe, v('--vscode-editorWidget-border') || v('--vscode-panel-border'), '#808080');
    const palette = PALETTE_VARS.map((name, i) => resolveColor(probe, v(name), PALETTE_FALLBACK[i]!));
    const size = v('--vscode-font-size').trim() || '12px';
    const family = v('--vscode-font-family').trim() || 'sans-serif';
    return {
      foreground,
      muted,
      grid: withAlpha(gridBase, 0.35),
      font: `${size} ${family}`,
      palette,
      fill: withAlpha,
    };
  } finally {
    probe.remove();
  }
}

/** `rgb(r, g, b)` or `rgba(r, g, b, a)` → `rgba(r, g, b, alpha)`; other forms are returned as they are. */
function withAlpha(color: string, alpha: number): string {
  const m = /^rgba?\(\s*([\d.]+)[\s,]+([\d.]+)[\s,]+([\d.]+)/.exec(color);
  return m ? `rgba(${m[1]}, ${m[2]}, ${m[3]}, ${alpha})` : color;
}

/** Calls `onChange` (at most once per frame) when VS Code switches or edits the colour theme. */
export function watchTheme(onChange: () => void): void {
  let pending = false;
  const fire = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      onChange();
    });
  };
  const observer = new MutationObserver(fire);
  observer.observe(document.documentElement, { attributes: true, attributeFilter: ['style', 'class'] });
  observer.observe(document.body, { attributes: true, attributeFilter: ['class', 'data-vscode-theme-kind'] });
}
