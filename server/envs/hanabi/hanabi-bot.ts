/**
 * Scripted Hanabi players. The convention bot gives the warm start its demonstrations (it is the
 * environment's `solution`) and is the evaluation partner; the random player is the floor.
 *
 * The convention bot reads a `PlayerView` only (what its seat may know), in this order:
 *  1. play the oldest card it knows is playable (every identity the card may still have is the
 *     next of its colour: a known red 2 on red 1, or any 1 at the start);
 *  2. with a hint token, hint the first other player (in turn order) holding a playable card it
 *     does not know is playable: the hint that makes it known playable if one does, else its
 *     colour if that is unknown, else its rank;
 *  3. below the hint-token maximum, discard: a card it knows is useless, else the oldest card no
 *     hint touched, else the oldest card;
 *  4. otherwise (all tokens, nothing playable to hint) give the first hint that tells someone
 *     something, else any legal hint.
 * It never plays a card it is not sure of, so it never loses a fuse. This is the "simple agent" of
 * the Hanabi Learning Environment with a sure-play rule and a useless-first discard.
 */
import type { Rng } from '../rng.ts';
import {
  afterHint,
  knowledgeText,
  legalMoves,
  playerView,
  RANKS,
  surelyPlayable,
  surelyUseless,
  type CardKnowledge,
  type GameState,
  type Move,
  type PlayerView,
} from './hanabi-game.ts';

const untouched = (k: CardKnowledge, v: PlayerView): boolean => k.colours === (1 << v.rules.colours) - 1 && k.ranks === (1 << RANKS) - 1;

export function conventionMove(v: PlayerView): Move {
  const play = v.own.findIndex((k) => surelyPlayable(k, v.fireworks));
  if (play >= 0) return { kind: 'play', slot: play };
  if (v.hints > 0) {
    for (const other of v.others) {
      for (let i = 0; i < other.cards.length; i++) {
        const card = other.cards[i]!;
        const k = other.knowledge[i]!;
        if (v.fireworks[card.colour] !== card.rank - 1 || surelyPlayable(k, v.fireworks)) continue;
        const byColour = afterHint(k, card, card.colour, null);
        const byRank = afterHint(k, card, null, card.rank);
        if (surelyPlayable(byRank, v.fireworks)) return { kind: 'hint', target: other.seat, colour: null, rank: card.rank };
        if (surelyPlayable(byColour, v.fireworks)) return { kind: 'hint', target: other.seat, colour: card.colour, rank: null };
        const colourKnown = knowledgeText(k)[0] !== '?';
        return colourKnown ? { kind: 'hint', target: other.seat, colour: null, rank: card.rank } : { kind: 'hint', target: other.seat, colour: card.colour, rank: null };
      }
    }
  }
  if (v.hints < v.rules.hintTokens) {
    const useless = v.own.findIndex((k) => surelyUseless(k, v.fireworks));
    if (useless >= 0) return { kind: 'discard', slot: useless };
    const fresh = v.own.findIndex((k) => untouched(k, v));
    return { kind: 'discard', slot: fresh >= 0 ? fresh : 0 };
  }
  // All hint tokens: a discard is illegal and no playable card needs a hint; say something new.
  let fallback: Move | null = null;
  for (const other of v.others) {
    for (let i = 0; i < other.cards.length; i++) {
      const card = other.cards[i]!;
      for (const [colour, rank] of [[null, card.rank], [card.colour, null]] as const) {
        const hint: Move = { kind: 'hint', target: other.seat, colour, rank };
        fallback ??= hint;
        const tells = other.cards.some((c, j) => knowledgeText(afterHint(other.knowledge[j]!, c, colour, rank)) !== knowledgeText(other.knowledge[j]!));
        if (tells) return hint;
      }
    }
  }
  if (fallback === null) throw new Error('hanabi bot: nobody has a card to hint');
  return fallback;
}

/** Uniform over the legal moves (the random baseline; it reads the state only for legality). */
export function randomMove(s: GameState, rng: Rng): Move {
  return rng.pick(legalMoves(playerView(s, s.current)));
}
