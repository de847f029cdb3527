/**
 * One kept turn of a trajectory: who acted, the prompt (collapsed, filled in only when opened), the
 * K branches as a listbox (rewards, advantage, parse error, programs run, the kept one marked), and
 * the selected branch's response with per-token shading, followed by the programs it ran. The response is rendered when the section first nears
 * the viewport, so opening a long trajectory costs only what is on screen.
 *
 * Keyboard: the branch list is one tab stop (roving tabindex); ↑/↓/Home/End select a branch, Enter
 * on a branch of another rollout opens that trajectory.
 */
import { h } from '../host-channel.ts';
import { executionRows, programsFlag } from './execution-rows.ts';
import { renderExecutions } from './execution-view.ts';
import { formatSigned, type BranchView, type TurnView } from './inspector-model.ts';
import { renderResponse } from './response-view.ts';

export interface TurnSectionHooks {
  openTrajectory(id: number): void;
}

const visibility = new IntersectionObserver(
  (entries) => {
    for (const e of entries) {
      if (!e.isIntersecting) continue;
      visibility.unobserve(e.target);
      sections.get(e.target)?.renderSelected();
    }
  },
  { rootMargin: '600px 0px' },
);
const sections = new WeakMap<Element, TurnSection>();

export class TurnSection {
  readonly el: HTMLElement;
  readonly #list: HTMLElement;
  readonly #options: HTMLElement[] = [];
  readonly #detail: HTMLElement;
  #selected: number;
  #visible = false;

  constructor(
    readonly view: TurnView,
    private readonly hooks: TurnSectionHooks,
  ) {
    const t = view.turn;
    this.#selected = view.keptIndex;
    const k = view.branches.length;
    this.#list = h('div', { class: 'branches', attrs: { role: 'listbox', 'aria-label': `Branches of turn ${t.turn}, ${t.agentId}` } });
    this.#list.append(
      h('div', { class: 'branch branch-head', attrs: { 'aria-hidden': 'true' } }, ...['branch', '', 'reward', 'team', 'local', 'advantage', ''].map((c) => h('span', { text: c }))),
    );
    view.branches.forEach((b, i) => {
      const opt = this.#option(b, i);
      this.#options.push(opt);
      this.#list.append(opt);
    });
    this.#list.addEventListener('keydown', (e) => this.#onKey(e));
    this.#detail = h('div', { class: 'branch-detail' });
    this.el = h(
      'section',
      { class: 'turn', attrs: { 'data-turn': view.key, 'aria-label': `Turn ${t.turn}, agent ${t.agentId}` } },
      h(
        'header',
        { class: 'turn-header' },
        h('h2', { text: `Turn ${t.turn} · ${t.agentId}` }),
        h('span', { class: 'muted', text: `policy ${t.policyId}` }),
        h('span', { class: 'muted', text: k > 1 ? `${k} branches · reward ${view.rewardMean.toFixed(3)} ± ${view.rewardStd.toFixed(3)}` : 'one sample (no group)' }),
      ),
      this.#prompt(t.promptText),
      this.#list,
      this.#detail,
    );
    this.#markSelected();
    sections.set(this.el, this);
    visibility.observe(this.el);
  }

  /** Focuses the branch list (the turn's tab stop). */
  focus(): void {
    this.#options[this.#selected]?.focus();
    this.el.scrollIntoView({ block: 'nearest' });
  }

  /** Renders the selected branch's response (first time the section is near the viewport, and on selection). */
  renderSelected(): void {
    this.#visible = true;
    const b = this.view.branches[this.#selected];
    if (!b) return;
    const r = b.row;
    const facts = [
      `branch ${r.branch}${b.isKept ? ' (kept)' : ''}${b.otherTrajectoryId !== undefined ? ` of trajectory #${b.otherTrajectoryId}` : ''}`,
      `reward ${formatSigned(r.reward)} = team ${formatSigned(r.teamReward)} ⊕ local ${formatSigned(r.localReward)}`,
      r.advantage === undefined ? 'not trained on' : `advantage ${formatSigned(r.advantage)}`,
      `${r.responseTokens.length} tokens`,
    ];
    const programs = renderExecutions(executionRows(r.executions));
    this.#detail.replaceChildren(
      h('p', { class: 'branch-facts', text: facts.join(' · ') }),
      ...(r.parseError !== undefined ? [h('p', { class: 'parse-error', text: `Parse error: ${r.parseError}` })] : []),
      renderResponse(r),
      ...(programs === null ? [] : [programs]),
    );
  }

  #prompt(text: string): HTMLElement {
    const body = h('pre', { class: 'prompt' });
    const details = h('details', { class: 'prompt-details' }, h('summary', { text: `Prompt · ${text.length} characters` }), body);
    // Prompts carry the whole environment state and repeat turn after turn: filled in on first open.
    details.addEventListener('toggle', () => {
      if (details.open && body.childNodes.length === 0) body.textContent = text;
    });
    return details;
  }

  #option(b: BranchView, i: number): HTMLElement {
    const r = b.row;
    const cells = [
      h('span', { text: `#${r.branch}` }),
      h('span', { class: b.isKept ? 'kept' : 'muted', text: b.isKept ? '★ kept' : b.rank === 1 ? this.#bestLabel() : '' }),
      h('span', { class: 'num', text: formatSigned(r.reward) }),
      h('span', { class: 'num muted', text: formatSigned(r.teamReward) }),
      h('span', { class: 'num muted', text: formatSigned(r.localReward) }),
      h('span', { class: `num ${(r.advantage ?? 0) > 0 ? 'pos' : (r.advantage ?? 0) < 0 ? 'neg' : 'muted'}`, text: formatSigned(r.advantage) }),
      h('span', { class: 'flags' }),
    ];
    const flags = cells[6]!;
    if (r.parseError !== undefined) flags.append(h('span', { class: 'parse-error', text: '⚠ parse error', attrs: { title: r.parseError } }));
    const programs = programsFlag(r.executions);
    if (programs !== undefined) flags.append(h('span', { class: 'muted', text: ` ▸ ${programs}` }));
    if (b.otherTrajectoryId !== undefined) {
      const link = h('button', { class: 'link', text: `trajectory #${b.otherTrajectoryId} ↗`, attrs: { type: 'button', tabindex: '-1' } });
      const id = b.otherTrajectoryId;
      link.addEventListener('click', (e) => {
        e.stopPropagation();
        this.hooks.openTrajectory(id);
      });
      flags.append(link);
    }
    const opt = h('div', { class: 'branch', attrs: { role: 'option', id: `b-${this.view.key}-${i}`, tabindex: '-1' } }, ...cells);
    opt.addEventListener('click', () => this.#select(i, true));
    return opt;
  }

  /** A best-reward branch that was not kept: a tie lost to the lower index (the rule), or, if not tied, worth a look. */
  #bestLabel(): string {
    return this.view.branches[this.view.keptIndex]?.rank === 1 ? 'tied best' : 'best';
  }

  #onKey(e: KeyboardEvent): void {
    const n = this.#options.length;
    let next = this.#selected;
    if (e.key === 'ArrowDown') next = Math.min(n - 1, next + 1);
    else if (e.key === 'ArrowUp') next = Math.max(0, next - 1);
    else if (e.key === 'Home') next = 0;
    else if (e.key === 'End') next = n - 1;
    else if (e.key === 'Enter') {
      const other = this.view.branches[this.#selected]?.otherTrajectoryId;
      if (other !== undefined) this.hooks.openTrajectory(other);
      return;
    } else return;
    e.preventDefault();
    this.#select(next, true);
  }

  #select(i: number, focus: boolean): void {
    if (i === this.#selected && this.#detail.childNodes.length > 0) {
      if (focus) this.#options[i]?.focus();
      return;
    }
    this.#selected = i;
    this.#markSelected();
    if (focus) this.#options[i]?.focus();
    if (this.#visible) this.renderSelected();
  }

  #markSelected(): void {
    this.#options.forEach((o, j) => {
      const on = j === this.#selected;
      o.setAttribute('aria-selected', String(on));
      o.tabIndex = on ? 0 : -1;
    });
  }
}
