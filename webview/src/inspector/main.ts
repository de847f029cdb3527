/**
 * The trajectory inspector webview: one trajectory, turn by turn, with each turn's K branches, the
 * kept one marked, and per-token shading of the responses. The host sends the trajectory after
 * `ready` and then the same task at other steps (`taskHistory`). The webview state keeps the
 * trajectory id and the shading mode.
 *
 * Keys: j / k next / previous turn, s switches the shading (log-prob ⇄ advantage); inside a turn the
 * branch list and the response have their own keys (turn-section.ts, response-view.ts).
 */
import './inspector.css';
import type { TrajectoryDetail, TrajectorySummary } from '../../../server/protocol/trajectory.ts';
import { h, openHostChannel } from '../host-channel.ts';
import { DISCONNECTED, StatusBanner } from '../status-banner.ts';
import { hostToInspectorSchema, inspectorStateSchema, type HostToInspector, type InspectorState, type InspectorToHost, type ShadingMode } from '../messages.ts';
import { buildTurnViews, formatSigned } from './inspector-model.ts';
import { installTokenTooltip } from './response-view.ts';
import { ADVANTAGE_SPAN, LOGPROB_SPAN } from './token-shading.ts';
import { TurnSection } from './turn-section.ts';

const header = h('header', { class: 'bar' }, h('h1', { text: 'Trajectory' }));
const banner = new StatusBanner(DISCONNECTED);
const history = h('nav', { class: 'history', attrs: { 'aria-label': 'This task at other steps' } });
history.hidden = true;
const shadingButtons = new Map<ShadingMode, HTMLButtonElement>();
const legend = h('span', { class: 'muted legend' });
const toolbar = h('div', { class: 'toolbar', attrs: { role: 'toolbar', 'aria-label': 'Shading' } }, h('span', { text: 'Shade tokens by' }));
for (const [mode, label] of [['logprob', 'log-prob'], ['advantage', 'advantage']] as const) {
  const b = h('button', { class: 'chip', text: label, attrs: { type: 'button', 'aria-pressed': 'false' } });
  b.addEventListener('click', () => setShading(mode));
  shadingButtons.set(mode, b);
  toolbar.append(b);
}
toolbar.append(legend, h('span', { class: 'muted keys', text: 'j/k: turns · ↑/↓: branches · ←/→ in a response: tokens · s: shading' }));
const turnsEl = h('main', { class: 'turns', text: 'Loading…' });
document.body.append(header, banner.element, history, toolbar, turnsEl);
installTokenTooltip();

let state: InspectorState | null = null;
let detail: TrajectoryDetail | null = null;
let sections: TurnSection[] = [];

const channel = openHostChannel<typeof hostToInspectorSchema, InspectorToHost, InspectorState>(hostToInspectorSchema, 'host → inspector', onMessage);
const stored = inspectorStateSchema.safeParse(channel.getState());
if (stored.success) state = stored.data;
setShading(state?.shading ?? 'logprob');

function onMessage(m: HostToInspector): void {
  switch (m.type) {
    case 'loading':
      // Saved at once, so a reload before the trajectory arrives still restores this panel.
      state = { trajectoryId: m.trajectoryId, shading: state?.shading ?? 'logprob' };
      channel.setState(state);
      turnsEl.replaceChildren(h('p', { class: 'muted', text: `Loading trajectory #${m.trajectoryId}…` }));
      break;
    case 'trajectory':
      detail = m.detail;
      state = { trajectoryId: m.detail.trajectory.id, shading: state?.shading ?? 'logprob' };
      channel.setState(state);
      banner.show(null);
      render(m.detail);
      break;
    case 'taskHistory':
      renderHistory(m.trajectories);
      break;
    case 'connection':
    case 'error':
      banner.showStatus(m);
      break;
  }
}

function render(d: TrajectoryDetail): void {
  const t = d.trajectory;
  const compare = h('button', { class: 'chip', text: 'Compare with…', attrs: { type: 'button', title: 'Open a diff of this trajectory and another one' } });
  compare.addEventListener('click', () => channel.post({ type: 'compareWith', trajectoryId: t.id }));
  const facts: Array<[string, string]> = [
    ['run', t.runId],
    ['step', String(t.step)],
    ['phase', t.phase],
    ['environment', `${t.envName} · seed ${t.envSeed} · instance ${t.envInstance}${t.rollout > 0 ? ` · rollout ${t.rollout}` : ''}`],
    ['success', t.success ? '✓ solved' : '✗ not solved'],
    ['team reward', formatSigned(t.teamReward)],
    ['local reward', formatSigned(t.localReward)],
    ['turns', String(t.turnCount)],
  ];
  header.replaceChildren(
    h('h1', { text: `Trajectory #${t.id}` }),
    // Each term with its value in one box, so a narrow panel wraps between facts, never inside one.
    h('dl', { class: 'facts' }, ...facts.map(([k, v]) => h('div', { class: 'fact' }, h('dt', { text: k }), h('dd', { class: k === 'success' ? (t.success ? 'pos' : 'neg') : '', text: v })))),
    compare,
  );
  sections = buildTurnViews(d).map((v) => new TurnSection(v, { openTrajectory }));
  turnsEl.replaceChildren(...(sections.length ? sections.map((s) => s.el) : [h('p', { class: 'muted', text: 'This trajectory has no turns.' })]));
}

function renderHistory(list: readonly TrajectorySummary[]): void {
  const current = detail?.trajectory.id;
  const others = list.filter((t) => t.id !== current);
  history.hidden = others.length === 0;
  if (others.length === 0) return;
  const items = [...list].sort((a, b) => a.step - b.step || a.rollout - b.rollout).map((t) => {
    const label = `step ${t.step} ${t.success ? '✓' : '✗'} ${formatSigned(t.teamReward)}`;
    if (t.id === current) return h('span', { class: 'chip current', text: label, attrs: { 'aria-current': 'true' } });
    const open = h('button', { class: 'chip', text: label, attrs: { type: 'button', title: `Open trajectory #${t.id}` } });
    open.addEventListener('click', () => openTrajectory(t.id));
    const diff = h('button', { class: 'icon-button', text: '⇄', attrs: { type: 'button', title: `Diff with trajectory #${t.id}`, 'aria-label': `Diff with step ${t.step}` } });
    diff.addEventListener('click', () => current !== undefined && channel.post({ type: 'compareWith', trajectoryId: current, otherId: t.id }));
    return h('span', { class: 'history-item' }, open, diff);
  });
  history.replaceChildren(h('span', { class: 'muted', text: 'Same task at other steps:' }), ...items);
}

function openTrajectory(id: number): void {
  channel.post({ type: 'openTrajectory', trajectoryId: id });
}

function setShading(mode: ShadingMode): void {
  document.body.classList.toggle('shade-logprob', mode === 'logprob');
  document.body.classList.toggle('shade-advantage', mode === 'advantage');
  for (const [m, b] of shadingButtons) b.setAttribute('aria-pressed', String(m === mode));
  legend.textContent =
    mode === 'logprob'
      ? `darker = less likely under the sampling policy (full at log-prob ≤ −${LOGPROB_SPAN})`
      : `green = positive, red = negative advantage (full at |A| ≥ ${ADVANTAGE_SPAN}); one value per sample`;
  if (state && state.shading !== mode) {
    state = { ...state, shading: mode };
    channel.setState(state);
  }
}

document.addEventListener('keydown', (e) => {
  if (e.altKey || e.ctrlKey || e.metaKey || (e.target instanceof HTMLElement && e.target.isContentEditable)) return;
  if (e.key === 's') {
    setShading(document.body.classList.contains('shade-logprob') ? 'advantage' : 'logprob');
    return;
  }
  if (e.key !== 'j' && e.key !== 'k') return;
  const at = sections.findIndex((s) => s.el.contains(document.activeElement));
  const next = e.key === 'j' ? Math.min(sections.length - 1, at + 1) : Math.max(0, at < 0 ? 0 : at - 1);
  sections[next]?.focus();
});

channel.post({ type: 'ready' });
