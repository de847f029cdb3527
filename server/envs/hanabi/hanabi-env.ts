/**
 * Hanabi: the cooperative card game as a multi-agent environment (rules in `hanabi-game.ts`, the
 * convention bot and the random player in `hanabi-bot.ts`). Agents `p1`..`pN` act in seat order,
 * p1 first; a seed is one shuffled deck, so a seed is one game.
 *
 * Variants: `colours` 3 (the default: 30 cards, sized for the embedded model, 2 players, a prompt of
 * about 250 characters) or 5 (the full game, for pretrained models); 2-5 players.
 *
 * The prompt is the acting player's view and nothing else (`playerView`): the fireworks, tokens,
 * deck size, discards, what happened since its last turn, the others' cards and what each of
 * them knows of them (from hints), and its own cards only as its hints describe them:
 *   hanabi p1 of 2, turn 4
 *   fireworks R1 Y0 G2 score 3
 *   hints 6/8 fuses 3/3 deck 14
 *   discards Y3
 *   p2 hinted p1 R: 2 4
 *   p2 has G3 Y1 R4 R2 G1
 *   p2 knows ?? Y1 ?? R? ??
 *   you have ?? R? ?? R2 ??
 *   p1: play N, discard N or hint P C
 * Slots count from 1 (the oldest card) and a drawn card goes last. A card's knowledge reads its
 * colour letter or '?', then its rank or '?'; a colour or rank is known once hints name it or
 * rule out the rest. With the option `showLegalMoves` the last line lists the player's legal moves
 * instead of the grammar, as the Hanabi Learning Environment hands its agents the legal moves:
 *   p1 legal: play 1-5, discard 1-5, hint p2 R G 1 4
 * (no `discard` with all 8 hint tokens, no `hint` without one, only colours and ranks the target
 * holds; with more players `hint p2 ..., hint p3 ...`). It is built from the player's view, so it
 * shows nothing the view does not. Off by default (prompts and warm-start cache keys as before).
 * With the option `showPlayable` a line after `you have` names what the player's knowledge (the
 * negative knowledge the `you have` line does not print included) and the others' cards tell it:
 *   known: play 2 4, useless 3; p2 playable 1 5
 * its own slots that can only be playable now and those that can never be played (the convention
 * bot's tests, `surelyPlayable` / `surelyUseless`), then, per other player in turn order, the
 * slots of that player's cards that are the next of their colour; '-' where none. With the option
 * `playableIdentity` as well, those cards are named by identity and slot ('p2 playable G2 at 1,
 * R1 at 5'), so the hint that names one can be read from the line. Also built from the view alone;
 * off by default.
 *
 * Actions, exactly (surrounding whitespace dropped): `play N`, `discard N`, `hint pK C` with C a
 * colour letter of the game (R Y G W B) or a rank 1-5. Text that does not parse is a parse error;
 * a well-formed move the rules refuse (no such card, no hint token, discarding with every token,
 * hinting yourself or a colour/rank the player does not hold) is an invalid move. Either way the
 * turn passes and nothing else changes; both are penalised and counted, never thrown.
 *
 * Rewards (per act):
 *  - teamReward: the points the act scored (+1 per card on a firework), `fusePenalty` (option,
 *    default 1) less for a misplay, and, when the last fuse goes with `bombOut` 'zero', minus the
 *    score so far (the final score is 0). An episode's team rewards sum to the final score less
 *    `fusePenalty` per lost fuse.
 *  - localReward: -1 for text that does not parse (`hanabiRewards.malformed`), -1 for a move the
 *    rules refuse (`illegal`), +0.1 for a hint that lets its receiver know a colour or rank of a
 *    card it did not know (`informativeHint`), plus `playableHintReward` (option, default 0) when
 *    one such card is playable now, 0 for every other legal act.
 * `success`: the game ended by the rules (the deck ran out, or every firework is complete) with
 * fuses left; `score` is the game's score. The episode also ends after `maxTurns` rounds (option;
 * by default the longest legal game, which only acts that pass can reach), with the score reached.
 */
import { z } from 'zod';
import { describeChar, trimAscii, type Parsed } from '../action-text.ts';
import { checkActor, checkAgent, checkSeed, copyStats, emptyStats, parseOptions, roundReward, type AgentStats, type AgentTurnResult, type Environment, type EnvironmentFactory } from '../environment.ts';
import { conventionMove } from './hanabi-bot.ts';
import {
  applyMove,
  cardText,
  cloneGame,
  colourLetters,
  dealGame,
  fullDeck,
  handSizeFor,
  illegality,
  knowledgeText,
  legalMoves,
  passTurn,
  playerView,
  RANKS,
  score,
  shuffledDeck,
  surelyPlayable,
  surelyUseless,
  type Card,
  type CardKnowledge,
  type GameRules,
  type GameState,
  type Move,
  type PlayerView,
} from './hanabi-game.ts';

export const hanabiRewards = { malformed: -1, illegal: -1, informativeHint: 0.1 } as const;

export const hanabiOptionsSchema = z
  .object({
    /** Players, 2-5 (hands of 5 cards with 2-3 players, 4 with 4-5). */
    players: z.number().int().min(2).max(5).default(2).describe('Players, 2-5: agents p1..pN. Hands hold 5 cards with 2-3 players, 4 with 4-5.'),
    /** Colours in the deck: 3 (the small variant, 30 cards) to 5 (the full game, 50 cards). */
    colours: z.number().int().min(1).max(5).default(3).describe('Colours, 1-5, taken in the order R Y G W B: 3 is the small variant for the embedded model (30 cards), 5 the full game (50 cards).'),
    /** Team reward lost for each misplay (a lost fuse). */
    fusePenalty: z.number().min(0).max(100).default(1).describe('Team reward lost for each misplayed card (a lost fuse), on top of the points.'),
    /** Local reward added for a hint that tells its receiver something new about a card that is playable now. */
    playableHintReward: z
      .number()
      .min(0)
      .max(10)
      .optional()
      .describe(
        "Local reward added to informativeHint's for a hint that tells its receiver something new (a colour or rank, negative information included) about a card that is playable now: the convention bot's hint, whose value otherwise shows only when the receiver plays the card a turn or more later, in the receiver's reward. Reward-shaping for RL; it changes no prompt, act or score. Default off (0).",
      ),
    /** Score when the last fuse is lost: 'zero' (the Hanabi Learning Environment) or 'keep' the fireworks. */
    bombOut: z.enum(['zero', 'keep']).default('zero').describe("The score when the last fuse is lost: 'zero' (as the Hanabi Learning Environment scores it) or 'keep' the fireworks played."),
    /** Rounds after which an episode ends with the score it has; default: the longest legal game. */
    maxTurns: z.number().int().min(1).max(1000).optional().describe('Rounds (one act per player) after which the episode ends with the score reached, not a success. Default: the longest legal game, which only acts that pass (unreadable or illegal) can reach; set it lower to bound the cost of a policy that passes.'),
    /** The prompt's last line lists the legal moves (as the Learning Environment gives its agents) instead of the move grammar. */
    showLegalMoves: z
      .boolean()
      .optional()
      .describe("List the acting player's legal moves in its prompt's last line, as the Hanabi Learning Environment gives its agents the legal moves: 'p1 legal: play 1-5, discard 1-5, hint p2 R Y 1 3' (no discard with all 8 hint tokens, no hint without one, only colours and ranks the player holds), in place of the grammar line 'p1: play N, discard N or hint P C'. Default off."),
    /** A prompt line naming the player's own cards it knows to be playable or useless, and the others' playable cards. */
    showPlayable: z
      .boolean()
      .optional()
      .describe("Add a line after 'you have' naming what the acting player knows from its view: its own cards that can only be playable now and those that can never be played (by the convention bot's tests, negative hints included), and the others' cards that are playable now: 'known: play 2 4, useless 3; p2 playable 1 5' ('-' where none). Default off."),
    /** With showPlayable: the others' playable cards named by identity and slot ('p2 playable G2 at 1, R1 at 5'). */
    playableIdentity: z
      .boolean()
      .optional()
      .describe("With showPlayable: name the others' playable cards by identity and slot, 'p2 playable G2 at 1, R1 at 5' in place of 'p2 playable 1 5', so that a hint naming such a card (hint p2 G or hint p2 2) can be read from the one line. The cards are those the player sees in 'p2 has'. Requires showPlayable. Default off."),
  })
  .strict()
  .refine((o) => o.playableIdentity !== true || o.showPlayable === true, {
    path: ['playableIdentity'],
    message: 'playableIdentity changes the showPlayable line: set showPlayable too',
  })
  .refine((o) => fullDeck(o.colours).length > o.players * handSizeFor(o.players), {
    path: ['colours'],
    message: 'too few colours: the deck must hold more cards than the hands dealt (10 cards a colour; hands of 5 with 2-3 players, 4 with 4-5)',
  });

export type HanabiOptions = z.output<typeof hanabiOptionsSchema>;

const HINT_TOKENS = 8;
const FUSES = 3;

export function agentName(seat: number): string {
  return `p${seat + 1}`;
}

/** A move as the action text `act` reads. */
export function moveText(m: Move): string {
  if (m.kind !== 'hint') return `${m.kind} ${m.slot + 1}`;
  return `hint ${agentName(m.target)} ${m.colour !== null ? colourLetters[m.colour] : String(m.rank)}`;
}

/** Parses action text (see the header); seats and colours are checked against the game by `illegality`. */
export function parseMove(text: unknown, players: number): Parsed<Move> {
  if (typeof text !== 'string') return { ok: false, error: 'action is not text' };
  const s = trimAscii(text);
  if (s.length === 0) return { ok: false, error: 'empty action: expected play N, discard N or hint P C' };
  const slot = /^(play|discard) ([1-9])$/.exec(s);
  if (slot) return { ok: true, action: { kind: slot[1] as 'play' | 'discard', slot: Number(slot[2]) - 1 } };
  const hint = /^hint p([1-9]) ([RYGWB1-5])$/.exec(s);
  if (hint) {
    const target = Number(hint[1]) - 1;
    if (target >= players) return { ok: false, error: `no player p${target + 1}: players are p1-p${players}` };
    const what = hint[2]!;
    const rank = /[1-5]/.test(what) ? Number(what) : null;
    return { ok: true, action: { kind: 'hint', target, colour: rank === null ? colourLetters.indexOf(what as (typeof colourLetters)[number]) : null, rank } };
  }
  const word = /^[a-z]+/.exec(s)?.[0];
  if (word === 'play' || word === 'discard') return { ok: false, error: `expected ${word} N with a card number 1-9` };
  if (word === 'hint') return { ok: false, error: 'expected hint pK C with a player pK and a colour letter (R Y G W B) or a rank 1-5' };
  return { ok: false, error: `unknown action starting with ${describeChar(s[0]!)}: expected play N, discard N or hint P C` };
}

/** Slots as the legal line writes them: '1-5', or '1' for a hand of one card. */
function slotRange(n: number): string {
  return n === 1 ? '1' : `1-${n}`;
}

/**
 * `legalMoves(v)` written compactly: 'play 1-5, discard 1-5, hint p2 R Y 1 3' (several players:
 * 'hint p2 R 1, hint p3 G 2 4'): slots as a range (the rules make every slot playable, and
 * discardable when discarding is allowed at all), hints grouped by target in turn order. Built from
 * the view alone, so any player's prompt may carry it without showing its own cards.
 */
export function legalMovesText(v: PlayerView): string {
  const slots = new Map<'play' | 'discard', number>();
  const hints = new Map<number, string[]>();
  for (const m of legalMoves(v)) {
    if (m.kind === 'hint') {
      const whats = hints.get(m.target) ?? [];
      whats.push(m.colour !== null ? colourLetters[m.colour]! : String(m.rank));
      hints.set(m.target, whats);
    } else slots.set(m.kind, (slots.get(m.kind) ?? 0) + 1);
  }
  return [
    ...[...slots].map(([verb, n]) => `${verb} ${slotRange(n)}`),
    ...[...hints].map(([target, whats]) => `hint ${agentName(target)} ${whats.join(' ')}`),
  ].join(', ');
}

/** Slots (1-based) as the playable line writes them: '2 4', or '-' for none. */
function slotList(slots: readonly number[]): string {
  return slots.length === 0 ? '-' : slots.map((i) => i + 1).join(' ');
}

/**
 * The `showPlayable` line: 'known: play 2 4, useless 3; p2 playable 1 5'. Own slots by the bot's
 * knowledge tests (`surelyPlayable`, `surelyUseless`: every identity the card may still have, from
 * positive and negative hints), the others' slots by their cards (visible to this player), in
 * turn order; with `byIdentity` (the option `playableIdentity`) each of the others' playable cards
 * as its identity and slot: 'p2 playable G2 at 1, R1 at 5'. Built from the view alone, so it shows
 * nothing of the player's own cards.
 */
export function playableText(v: PlayerView, byIdentity = false): string {
  const own = (test: (k: CardKnowledge, f: readonly number[]) => boolean): number[] => v.own.flatMap((k, i) => (test(k, v.fireworks) ? [i] : []));
  const others = v.others.map((o) => {
    const playable = o.cards.flatMap((c, i) => (v.fireworks[c.colour] === c.rank - 1 ? [i] : []));
    const named = byIdentity && playable.length > 0 ? playable.map((i) => `${cardText(o.cards[i]!)} at ${i + 1}`).join(', ') : slotList(playable);
    return `${agentName(o.seat)} playable ${named}`;
  });
  return [`known: play ${slotList(own(surelyPlayable))}, useless ${slotList(own(surelyUseless))}`, ...others].join('; ');
}

/** One act as every player saw it, for the "since your last turn" lines. */
interface LoggedAct {
  readonly seat: number;
  readonly text: string;
}

export class HanabiEnvironment implements Environment {
  readonly name = 'hanabi';
  readonly agents: readonly string[];
  readonly maxTurns: number;
  readonly optimalMoves = null;
  readonly seed: number;
  readonly options: HanabiOptions;
  readonly rules: GameRules;
  #game: GameState;
  #acts = 0;
  #log: LoggedAct[] = [];
  #stats: Record<string, AgentStats>;

  /** Deals the seed's deck, or `deck` (top card last) where given: tests set up deals with it. */
  constructor(seed: number, options: HanabiOptions, deck?: readonly Card[]) {
    this.seed = seed;
    this.options = Object.freeze({ ...options });
    this.rules = Object.freeze({ players: options.players, colours: options.colours, hintTokens: HINT_TOKENS, fuses: FUSES, bombOut: options.bombOut });
    this.agents = Array.from({ length: options.players }, (_, i) => agentName(i));
    // Legal play cannot outlast this: every act plays, discards or hints, cards leave hands at most
    // once each, and every hint spends a token that only an initial token, a discard or a 5 gave.
    const cards = fullDeck(options.colours).length;
    this.maxTurns = options.maxTurns ?? Math.ceil((2 * cards + HINT_TOKENS + options.colours) / options.players) + 1;
    this.#game = dealGame(this.rules, deck ?? shuffledDeck(options.colours, seed));
    this.#stats = emptyStats(this.agents);
  }

  /** A copy of the game state (every hand included): for tests, bots and reports, never prompts. */
  get state(): GameState {
    return cloneGame(this.#game);
  }
  /** The game's score now (0 after the fuses ran out, with bombOut 'zero'). */
  get score(): number {
    return score(this.#game);
  }
  get turn(): number {
    return Math.floor(this.#acts / this.rules.players);
  }
  get done(): boolean {
    return this.#game.ended !== null || this.turn >= this.maxTurns;
  }
  get success(): boolean {
    return this.#game.ended === 'deck' || this.#game.ended === 'perfect';
  }
  get stats(): Readonly<Record<string, Readonly<AgentStats>>> {
    return copyStats(this.#stats);
  }

  currentAgent(): string {
    return agentName(this.#game.current);
  }

  observe(agent: string): string {
    checkAgent(this, agent);
    const seat = this.agents.indexOf(agent);
    const v = playerView(this.#game, seat);
    const cards = (cs: readonly Card[]): string => cs.map(cardText).join(' ');
    const lines = [
      `hanabi ${agent} of ${this.rules.players}, turn ${this.turn + 1}`,
      `fireworks ${v.fireworks.map((f, c) => `${colourLetters[c]}${f}`).join(' ')} score ${score(this.#game)}`,
      `hints ${v.hints}/${this.rules.hintTokens} fuses ${v.fuses}/${this.rules.fuses} deck ${v.deck}${v.finalActs === null ? '' : ' last round'}`,
      `discards ${v.discards.length === 0 ? '-' : cards([...v.discards].sort((a, b) => a.colour - b.colour || a.rank - b.rank))}`,
      // What the others did since this player's last act (at most one act each).
      ...this.#log.slice(-(this.rules.players - 1)).filter((a) => a.seat !== seat).map((a) => a.text),
      ...v.others.flatMap((o) => [`${agentName(o.seat)} has ${cards(o.cards)}`, `${agentName(o.seat)} knows ${o.knowledge.map(knowledgeText).join(' ')}`]),
      `you have ${v.own.map(knowledgeText).join(' ')}`,
      ...(this.options.showPlayable === true ? [playableText(v, this.options.playableIdentity === true)] : []),
      this.options.showLegalMoves === true ? `${agent} legal: ${legalMovesText(v)}` : `${agent}: play N, discard N or hint P C`,
    ];
    return `${lines.join('\n')}\n`;
  }

  act(agent: string, text: string): AgentTurnResult {
    checkActor(this, agent);
    const seat = this.#game.current;
    const stats = this.#stats[agent] as AgentStats;
    stats.acts++;
    this.#acts++;
    const parsed = parseMove(text, this.rules.players);
    if (!parsed.ok) {
      stats.parseErrors++;
      return this.#pass(seat, hanabiRewards.malformed, parsed.error, `${agent} passes (unreadable action)`);
    }
    const why = illegality(this.#game, parsed.action);
    if (why !== null) {
      stats.invalidMoves++;
      return { ...this.#pass(seat, hanabiRewards.illegal, null, `${agent} passes (${moveText(parsed.action)}: ${why})`), illegal: true };
    }
    const before = score(this.#game);
    const move = parsed.action;
    const effect = applyMove(this.#game, move);
    let team = score(this.#game) - before;
    if (effect.misplay) team -= this.options.fusePenalty;
    let local = 0;
    let said: string;
    if (move.kind === 'hint') {
      if (effect.informative) local = hanabiRewards.informativeHint;
      if (effect.informativePlayable) local += this.options.playableHintReward ?? 0;
      said = `${agent} hinted ${moveText(move).slice(5)}: ${effect.touched.map((i) => i + 1).join(' ')}`;
    } else {
      const card = cardText(effect.card!);
      said = move.kind === 'discard' ? `${agent} discarded ${card}` : effect.scored ? `${agent} played ${card}` : `${agent} misplayed ${card}, fuse lost`;
    }
    this.#log.push({ seat, text: said });
    return this.#result(roundReward(team), roundReward(local), null, said);
  }

  #pass(seat: number, local: number, parseError: string | null, info: string): AgentTurnResult {
    passTurn(this.#game);
    this.#log.push({ seat, text: `${agentName(seat)} passed (invalid action)` });
    return this.#result(0, local, parseError, info);
  }

  #result(teamReward: number, localReward: number, parseError: string | null, info: string): AgentTurnResult {
    return { teamReward, localReward, parseError, done: this.done, success: this.success, info };
  }

  clone(): HanabiEnvironment {
    const copy = new HanabiEnvironment(this.seed, this.options, fullDeck(this.rules.colours));
    copy.#game = cloneGame(this.#game);
    copy.#acts = this.#acts;
    copy.#log = [...this.#log];
    copy.#stats = copyStats(this.#stats);
    return copy;
  }

  /**
   * This environment (seed, options, turn, counters, log) in another position: tests and analyses
   * set up states with it. The state is copied, not shared.
   */
  withState(state: GameState): HanabiEnvironment {
    const copy = this.clone();
    copy.#game = cloneGame(state);
    return copy;
  }

  /** The convention bot's move for `agent`, from that player's view only. */
  solution(agent: string): string {
    checkAgent(this, agent);
    if (this.done) throw new Error('hanabi: no solution once the game is over');
    return moveText(conventionMove(playerView(this.#game, this.agents.indexOf(agent))));
  }
}

export const hanabi = {
  description: 'Hanabi, the cooperative card game: players p1..pN (2-5) see each other\'s cards but not their own; 3 colours (small) or 5 (full game).',
  optionsSchema: hanabiOptionsSchema,
  create(seed: number, options?: unknown): HanabiEnvironment {
    const o = parseOptions(hanabiOptionsSchema, options, 'hanabi');
    return new HanabiEnvironment(checkSeed(seed, 'hanabi'), o);
  },
  // The penalty is team reward only; 'keep' or 'zero' changes only the score of a game that has ended.
  rewardOnlyOptions: ['fusePenalty', 'bombOut', 'playableHintReward'],
} satisfies EnvironmentFactory<HanabiOptions>;

/** The highest score a variant allows. */
export function perfectScore(options: Pick<HanabiOptions, 'colours'>): number {
  return options.colours * RANKS;
}
