/**
 * Hanabi's rules as pure data and functions (the published rules, Antoine Bauza, 2010, as the Hanabi
 * Learning Environment implements them: Bard et al., "The Hanabi Challenge", 2019). No prompts,
 * no rewards: `hanabi-env.ts` wraps this in the environment contract.
 *
 *  - Cards: `colours` colours (R Y G W B, the first 1-5), ranks 1-5 with 3, 2, 2, 2, 1 copies
 *    (1 1 1 2 2 3 3 4 4 5): 10 cards a colour, 30 in the 3-colour variant, 50 in the full game.
 *  - Hands: 5 cards with 2-3 players, 4 with 4-5. Slot 1 is the oldest card; a drawn card goes to
 *    the last slot.
 *  - Tokens: 8 hint tokens and 3 fuses. A hint spends a token; a discard regains one (a discard
 *    with all 8 tokens available is illegal); completing a colour (playing its 5) regains one.
 *  - A hint names another player and a colour or a rank that at least one of its cards has; it
 *    tells that player which of its cards match.
 *  - A play succeeds when the card is the next rank of its colour's firework; otherwise the card
 *    is discarded and a fuse is lost.
 *  - The game ends at once when the last fuse is lost or every firework reaches 5, and otherwise
 *    one round after the deck runs out: after the act that draws the last card every player,
 *    the drawer included, acts once more.
 *  - Score: the sum of the fireworks' top ranks; 0 when the fuses ran out (the Learning
 *    Environment's rule: the fireworks explode), unless `bombOut` is 'keep'.
 *
 * Knowledge: each card in hand carries what its holder was told by hints, both positive (it is
 * red) and negative (it is not a 3), as the Learning Environment's card knowledge.
 */
import { Rng } from '../rng.ts';

export const colourLetters = ['R', 'Y', 'G', 'W', 'B'] as const;
export const colourNames = ['red', 'yellow', 'green', 'white', 'blue'] as const;
export const RANKS = 5;
/** Copies of each rank 1..5 in a colour. */
export const rankCopies = [3, 2, 2, 2, 1] as const;

export interface Card {
  /** 0-based colour index into `colourLetters`. */
  readonly colour: number;
  /** 1..5. */
  readonly rank: number;
}

/** What a card's holder knows of it from hints. Bit i of a mask: colour i / rank i+1 still possible. */
export interface CardKnowledge {
  colours: number;
  ranks: number;
}

export interface GameRules {
  readonly players: number;
  readonly colours: number;
  readonly hintTokens: number;
  readonly fuses: number;
  /** Score when the fuses run out: 'zero' (the Learning Environment) or 'keep' the fireworks. */
  readonly bombOut: 'zero' | 'keep';
}

export type Move =
  | { readonly kind: 'play'; readonly slot: number }
  | { readonly kind: 'discard'; readonly slot: number }
  | { readonly kind: 'hint'; readonly target: number; readonly colour: number | null; readonly rank: number | null };

/** Why a game ended. */
export type EndReason = 'fuses' | 'perfect' | 'deck';

export interface GameState {
  readonly rules: GameRules;
  /** Cards still to draw; the next card is the last element. */
  deck: Card[];
  hands: Card[][];
  knowledge: CardKnowledge[][];
  /** Top rank played per colour (0: none). */
  fireworks: number[];
  /** Discarded and misplayed cards, in order. */
  discards: Card[];
  hints: number;
  fuses: number;
  /** The seat to act. */
  current: number;
  /** Acts left once the deck is empty (null while it is not). */
  finalActs: number | null;
  ended: EndReason | null;
}

/** What applying a legal move did, for rewards and the report lines. */
export interface MoveEffect {
  /** The card played or discarded. */
  readonly card: Card | null;
  /** A play that went on its firework. */
  readonly scored: boolean;
  /** A play that cost a fuse. */
  readonly misplay: boolean;
  /** Slots (0-based) a hint touched. */
  readonly touched: readonly number[];
  /** Whether the hint let the target know a colour or a rank of one of its cards it did not know. */
  readonly informative: boolean;
  /** Whether it did so for a card that is playable now (the convention bot's kind of hint). */
  readonly informativePlayable: boolean;
}

export function handSizeFor(players: number): number {
  return players <= 3 ? 5 : 4;
}

export function cardText(c: Card): string {
  return `${colourLetters[c.colour]}${c.rank}`;
}

/** Every card of the variant, in a fixed order (colour, then rank). */
export function fullDeck(colours: number): Card[] {
  const deck: Card[] = [];
  for (let colour = 0; colour < colours; colour++) {
    rankCopies.forEach((copies, r) => {
      for (let k = 0; k < copies; k++) deck.push({ colour, rank: r + 1 });
    });
  }
  return deck;
}

const allBits = (n: number): number => (1 << n) - 1;

/** The opening position: `deck` is dealt from its end (seat by seat, a card at a time). */
export function dealGame(rules: GameRules, deck: readonly Card[]): GameState {
  const size = handSizeFor(rules.players);
  const s: GameState = {
    rules,
    deck: [...deck],
    hands: Array.from({ length: rules.players }, () => []),
    knowledge: Array.from({ length: rules.players }, () => []),
    fireworks: Array<number>(rules.colours).fill(0),
    discards: [],
    hints: rules.hintTokens,
    fuses: rules.fuses,
    current: 0,
    finalActs: null,
    ended: null,
  };
  if (deck.length < size * rules.players) throw new Error(`hanabi: a deck of ${deck.length} cards cannot deal ${rules.players} hands of ${size}`);
  for (let k = 0; k < size; k++) for (let p = 0; p < rules.players; p++) draw(s, p);
  // A deal that takes every card (a test's short deck) starts in the final round.
  if (s.deck.length === 0) s.finalActs = rules.players;
  return s;
}

/** The seeded deal: the full deck shuffled by the seed. */
export function shuffledDeck(colours: number, seed: number): Card[] {
  return new Rng(seed, 'hanabi').shuffle(fullDeck(colours));
}

function draw(s: GameState, seat: number): void {
  const card = s.deck.pop();
  if (card === undefined) return;
  s.hands[seat]!.push(card);
  s.knowledge[seat]!.push({ colours: allBits(s.rules.colours), ranks: allBits(RANKS) });
}

export function score(s: GameState): number {
  if (s.ended === 'fuses' && s.rules.bombOut === 'zero') return 0;
  return s.fireworks.reduce((a, b) => a + b, 0);
}

export function isPlayable(s: GameState, c: Card): boolean {
  return s.fireworks[c.colour] === c.rank - 1;
}

/** Why `move` is illegal for the seat to act, or null when it is legal. */
export function illegality(s: GameState, move: Move): string | null {
  const hand = s.hands[s.current]!;
  if (move.kind === 'play' || move.kind === 'discard') {
    if (move.slot < 0 || move.slot >= hand.length) return `there is no card ${move.slot + 1} (your hand has ${hand.length})`;
    if (move.kind === 'discard' && s.hints >= s.rules.hintTokens) return `all ${s.rules.hintTokens} hint tokens are available: discarding is not allowed`;
    return null;
  }
  if (s.hints <= 0) return 'no hint tokens left';
  if (move.target === s.current) return 'you cannot hint yourself';
  if (move.target < 0 || move.target >= s.rules.players) return 'no such player';
  if (move.colour !== null && move.colour >= s.rules.colours) return 'no such colour in this game';
  if (touchedSlots(s.hands[move.target]!, move).length === 0) return 'the hint must name at least one of their cards';
  return null;
}

function touchedSlots(hand: readonly Card[], move: Move & { kind: 'hint' }): number[] {
  const out: number[] = [];
  hand.forEach((c, i) => {
    if ((move.colour !== null && c.colour === move.colour) || (move.rank !== null && c.rank === move.rank)) out.push(i);
  });
  return out;
}

/** Applies a legal move (check `illegality` first) and passes the turn. */
export function applyMove(s: GameState, move: Move): MoveEffect {
  if (s.ended !== null) throw new Error('hanabi: the game is over');
  const why = illegality(s, move);
  if (why !== null) throw new Error(`hanabi: illegal move: ${why}`);
  const seat = s.current;
  let effect: MoveEffect;
  if (move.kind === 'hint') {
    s.hints--;
    const hand = s.hands[move.target]!;
    const known = s.knowledge[move.target]!;
    const touched = touchedSlots(hand, move);
    let informative = false;
    let informativePlayable = false;
    hand.forEach((c, i) => {
      const k = known[i]!;
      const next = afterHint(k, c, move.colour, move.rank);
      if (knowledgeText(next) !== knowledgeText(k)) {
        informative = true;
        if (isPlayable(s, c)) informativePlayable = true;
      }
      known[i] = next;
    });
    effect = { card: null, scored: false, misplay: false, touched, informative, informativePlayable };
  } else {
    const card = s.hands[seat]!.splice(move.slot, 1)[0]!;
    s.knowledge[seat]!.splice(move.slot, 1);
    let scored = false;
    let misplay = false;
    if (move.kind === 'discard') {
      s.discards.push(card);
      s.hints++;
    } else if (isPlayable(s, card)) {
      s.fireworks[card.colour] = card.rank;
      scored = true;
      if (card.rank === RANKS && s.hints < s.rules.hintTokens) s.hints++;
    } else {
      s.discards.push(card);
      s.fuses--;
      misplay = true;
    }
    const hadCards = s.deck.length > 0;
    draw(s, seat);
    // The act that draws the last card starts the final round: every player acts once more.
    if (hadCards && s.deck.length === 0) s.finalActs = s.rules.players + 1;
    effect = { card, scored, misplay, touched: [], informative: false, informativePlayable: false };
  }
  if (s.finalActs !== null) s.finalActs--;
  if (s.fuses <= 0) s.ended = 'fuses';
  else if (s.fireworks.every((f) => f === RANKS)) s.ended = 'perfect';
  else if (s.finalActs === 0) s.ended = 'deck';
  s.current = (seat + 1) % s.rules.players;
  return effect;
}

/** Passes the turn without a move (what an unreadable or illegal action does), counting toward the final round. */
export function passTurn(s: GameState): void {
  if (s.ended !== null) throw new Error('hanabi: the game is over');
  if (s.finalActs !== null && --s.finalActs === 0) s.ended = 'deck';
  s.current = (s.current + 1) % s.rules.players;
}

export function cloneGame(s: GameState): GameState {
  return {
    rules: s.rules,
    deck: [...s.deck],
    hands: s.hands.map((h) => [...h]),
    knowledge: s.knowledge.map((h) => h.map((k) => ({ ...k }))),
    fireworks: [...s.fireworks],
    discards: [...s.discards],
    hints: s.hints,
    fuses: s.fuses,
    current: s.current,
    finalActs: s.finalActs,
    ended: s.ended,
  };
}

/** The only colour / rank a card's holder knows it has, or null while several remain. */
export function knownColour(k: CardKnowledge): number | null {
  return k.colours !== 0 && (k.colours & (k.colours - 1)) === 0 ? Math.log2(k.colours) : null;
}
export function knownRank(k: CardKnowledge): number | null {
  return k.ranks !== 0 && (k.ranks & (k.ranks - 1)) === 0 ? Math.log2(k.ranks) + 1 : null;
}

/**
 * Everything one seat may know: the others' cards and what each of them was told, its own cards
 * only as its hints describe them, and the public table. Prompts and the convention bot read
 * this, never the state, so neither can see a seat's own cards.
 */
export interface PlayerView {
  readonly seat: number;
  readonly rules: GameRules;
  readonly fireworks: readonly number[];
  readonly discards: readonly Card[];
  readonly hints: number;
  readonly fuses: number;
  /** Cards left to draw. */
  readonly deck: number;
  /** Acts left in the final round (null while the deck lasts). */
  readonly finalActs: number | null;
  /** The viewer's own hand as it knows it, slot by slot. */
  readonly own: readonly CardKnowledge[];
  /** The other seats in turn order after the viewer: their cards and what they know of them. */
  readonly others: readonly { readonly seat: number; readonly cards: readonly Card[]; readonly knowledge: readonly CardKnowledge[] }[];
}

export function playerView(s: GameState, seat: number): PlayerView {
  const n = s.rules.players;
  return {
    seat,
    rules: s.rules,
    fireworks: [...s.fireworks],
    discards: [...s.discards],
    hints: s.hints,
    fuses: s.fuses,
    deck: s.deck.length,
    finalActs: s.finalActs,
    own: s.knowledge[seat]!.map((k) => ({ ...k })),
    others: Array.from({ length: n - 1 }, (_, d) => {
      const other = (seat + 1 + d) % n;
      return { seat: other, cards: [...s.hands[other]!], knowledge: s.knowledge[other]!.map((k) => ({ ...k })) };
    }),
  };
}

/**
 * Every legal move of `v`'s player when it is to act, from what it may know: its hand's size, the
 * tokens and the others' cards (plays, discards below the hint-token maximum, then hints with a
 * token: colours, then ranks, that the target holds, by seat after the mover). The one enumeration
 * of the rules that `illegality` checks; the random player and the prompt's legal line both read it.
 */
export function legalMoves(v: PlayerView): Move[] {
  const moves: Move[] = [];
  const n = v.own.length;
  for (let slot = 0; slot < n; slot++) moves.push({ kind: 'play', slot });
  if (v.hints < v.rules.hintTokens) for (let slot = 0; slot < n; slot++) moves.push({ kind: 'discard', slot });
  if (v.hints > 0) {
    for (const { seat: target, cards } of v.others) {
      for (let colour = 0; colour < v.rules.colours; colour++) if (cards.some((c) => c.colour === colour)) moves.push({ kind: 'hint', target, colour, rank: null });
      for (let rank = 1; rank <= RANKS; rank++) if (cards.some((c) => c.rank === rank)) moves.push({ kind: 'hint', target, colour: null, rank });
    }
  }
  return moves;
}

/** Every (colour, rank) a card may still be, given its knowledge. */
export function possibilities(k: CardKnowledge, colours: number): Card[] {
  const out: Card[] = [];
  for (let colour = 0; colour < colours; colour++) {
    if ((k.colours & (1 << colour)) === 0) continue;
    for (let rank = 1; rank <= RANKS; rank++) if ((k.ranks & (1 << (rank - 1))) !== 0) out.push({ colour, rank });
  }
  return out;
}

/** The card can only be playable (every identity it may have is the next of its colour). */
export function surelyPlayable(k: CardKnowledge, fireworks: readonly number[]): boolean {
  const ps = possibilities(k, fireworks.length);
  return ps.length > 0 && ps.every((c) => fireworks[c.colour] === c.rank - 1);
}

/** The card can never be played any more (every identity it may have is already on its firework). */
export function surelyUseless(k: CardKnowledge, fireworks: readonly number[]): boolean {
  const ps = possibilities(k, fireworks.length);
  return ps.length > 0 && ps.every((c) => c.rank <= fireworks[c.colour]!);
}

/** A card's knowledge as its holder reads it: colour letter or '?', rank or '?'. */
export function knowledgeText(k: CardKnowledge): string {
  const c = knownColour(k);
  const r = knownRank(k);
  return `${c === null ? '?' : colourLetters[c]}${r === null ? '?' : r}`;
}

/** The knowledge `k` would become after a hint of `colour` or `rank` about card `c`. */
export function afterHint(k: CardKnowledge, c: Card, colour: number | null, rank: number | null): CardKnowledge {
  const next = { ...k };
  if (colour !== null) next.colours &= c.colour === colour ? 1 << colour : ~(1 << colour);
  if (rank !== null) next.ranks &= c.rank === rank ? 1 << (rank - 1) : ~(1 << (rank - 1));
  return next;
}
