// Hanabi: the published rules (deal, tokens, plays, the three ends, scoring), illegal and
// unreadable actions, rewards, privacy of each player's prompt, seeded deals, and the convention
// bot against random play.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isPrintableText } from '../action-text.ts';
import { Rng } from '../rng.ts';
import { trainSeed, validationSeed } from '../seed-ranges.ts';
import { ScriptedSeats } from '../scripted-seats.ts';
import { randomMove } from './hanabi-bot.ts';
import { hanabi, hanabiRewards, HanabiEnvironment, moveText, parseMove, type HanabiOptions } from './hanabi-env.ts';
import { cardText, colourLetters, fullDeck, handSizeFor, illegality, legalMoves, playerView, RANKS, type Card, type GameState, type Move } from './hanabi-game.ts';

const small: HanabiOptions = hanabiOptions({});

function hanabiOptions(o: Partial<HanabiOptions>): HanabiOptions {
  return hanabi.optionsSchema.parse(o);
}

/** Cards from text like 'R1 R2 Y5'. */
function cards(text: string): Card[] {
  return text.split(' ').map((t) => ({ colour: colourLetters.indexOf(t[0] as (typeof colourLetters)[number]), rank: Number(t[1]) }));
}

/**
 * An environment dealt from `draws` in drawing order: the first `players x handSize` cards go
 * round the table one at a time (p1's first card, p2's first card, ...), the rest are drawn later.
 */
function dealt(draws: string, options: Partial<HanabiOptions> = {}): HanabiEnvironment {
  return new HanabiEnvironment(0, hanabiOptions(options), cards(draws).reverse());
}

/** Hands as text, seat by seat. */
const hands = (s: GameState): string[] => s.hands.map((h) => h.map(cardText).join(' '));

/** Plays `texts` in turn order, returning the results. */
function play(env: HanabiEnvironment, ...texts: string[]) {
  return texts.map((t) => env.act(env.currentAgent(), t));
}

test('the deck has 10 cards a colour (1 1 1 2 2 3 3 4 4 5) and hands of 5 with 2-3 players, 4 with 4-5', () => {
  const counts = (deck: Card[]) => deck.map(cardText).sort().join(' ');
  assert.equal(counts(fullDeck(1)), 'R1 R1 R1 R2 R2 R3 R3 R4 R4 R5');
  assert.equal(fullDeck(3).length, 30);
  assert.equal(fullDeck(5).length, 50);
  for (const [players, size] of [[2, 5], [3, 5], [4, 4], [5, 4]] as const) {
    assert.equal(handSizeFor(players), size);
    const env = hanabi.create(7, { players, colours: 5 });
    const s = env.state;
    assert.deepEqual(s.hands.map((h) => h.length), Array(players).fill(size));
    assert.equal(s.deck.length, 50 - players * size);
    // The deal and the deck are the whole deck, each card once.
    assert.equal(counts([...s.deck, ...s.hands.flat()]), counts(fullDeck(5)));
    assert.deepEqual([s.hints, s.fuses, env.score], [8, 3, 0]);
    assert.deepEqual(env.agents, Array.from({ length: players }, (_, i) => `p${i + 1}`));
  }
  assert.throws(() => hanabi.create(1, { colours: 1 }), /colours: too few colours/);
  // maxTurns bounds an episode of acts that pass; the default is the longest legal game.
  const capped = hanabi.create(1, { maxTurns: 3 });
  while (!capped.done) capped.act(capped.currentAgent(), 'junk');
  assert.deepEqual([capped.turn, capped.success, capped.stats['p1']!.parseErrors], [3, false, 3]);
  assert.equal(hanabi.create(1).maxTurns, 37);
  assert.throws(() => hanabi.create(1, { players: 6 }), /players/);
});

test('a seed is one deal: the same seed deals the same game, different seeds different ones', () => {
  const deals = new Set<string>();
  for (let i = 0; i < 50; i++) {
    const seed = i % 2 ? trainSeed(i) : validationSeed(i);
    const a = hanabi.create(seed);
    const b = hanabi.create(seed);
    assert.deepEqual(a.state, b.state);
    // The whole bot game replays identically.
    while (!a.done) {
      const agent = a.currentAgent();
      assert.equal(a.observe(agent), b.observe(agent));
      assert.deepEqual(a.act(agent, a.solution(agent)), b.act(agent, b.solution(agent)));
    }
    assert.equal(a.score, b.score);
    deals.add(JSON.stringify(hanabi.create(seed).state.deck));
  }
  assert.equal(deals.size, 50);
});

test('a successful play scores 1; a misplay is discarded, costs a fuse and fusePenalty', () => {
  // p1 holds R1 R3 Y1 Y2 G1, p2 R2 R4 Y3 Y4 G2; R5 is the next card drawn.
  const env = dealt('R1 R2 R3 R4 Y1 Y3 Y2 Y4 G1 G2 R5 Y5 G5 G4', { fusePenalty: 0.5 });
  assert.deepEqual(hands(env.state), ['R1 R3 Y1 Y2 G1', 'R2 R4 Y3 Y4 G2']);
  const [good, bad] = play(env, 'play 1', 'play 2');
  assert.deepEqual([good!.teamReward, good!.localReward, good!.parseError], [1, 0, null]);
  assert.match(good!.info, /p1 played R1/);
  assert.deepEqual([bad!.teamReward, bad!.localReward], [-0.5, 0]);
  assert.match(bad!.info, /p2 misplayed R4, fuse lost/);
  const s = env.state;
  assert.deepEqual(s.fireworks, [1, 0, 0]);
  assert.deepEqual([s.fuses, s.hints, env.score], [2, 8, 1]);
  assert.deepEqual(s.discards.map(cardText), ['R4']);
  // Each played card was replaced by the next card of the deck, in the last slot.
  assert.deepEqual(hands(s), ['R3 Y1 Y2 G1 R5', 'R2 Y3 Y4 G2 Y5']);
});

test('hints spend a token, discards regain one, a completed colour regains one; at 8 a discard is illegal, at 0 a hint', () => {
  const env = dealt('R1 Y1 R2 Y2 R3 Y3 R4 Y4 R5 G1 G1 G2 G2 G3 G3 G4 G4 G5 G1 R1');
  assert.equal(env.state.hints, 8);
  const [discard] = play(env, 'discard 1');
  assert.equal(discard!.parseError, null);
  assert.equal(env.stats['p1']!.invalidMoves, 1, 'discarding with all 8 tokens is refused');
  assert.equal(env.state.hints, 8);
  play(env, 'hint p1 R'); // p2 hints: 7
  assert.equal(env.state.hints, 7);
  play(env, 'discard 5'); // p1 discards R5: back to 8
  assert.equal(env.state.hints, 8);
  play(env, 'discard 1'); // never above 8: refused
  assert.equal(env.state.hints, 8);
  assert.equal(env.stats['p2']!.invalidMoves, 1);
  assert.deepEqual(env.state.discards.map(cardText), ['R5']);
  // Spend every token, then a hint is refused and a discard works again.
  for (let i = 0; i < 8; i++) play(env, i % 2 === 0 ? 'hint p2 G' : 'hint p1 R');
  assert.equal(env.state.hints, 0);
  const before = env.state;
  const [refused] = play(env, 'hint p2 G');
  assert.equal(refused!.localReward, hanabiRewards.illegal);
  assert.equal(refused!.illegal, true);
  assert.match(refused!.info, /no hint tokens left/);
  assert.deepEqual({ ...env.state, current: before.current }, before, 'an illegal act changes nothing but the turn');
  play(env, 'discard 1');
  assert.equal(env.state.hints, 1);

  // Playing a 5 regains a token below 8 (and only then).
  const five = dealt('R1 Y1 R2 Y2 R3 Y3 R4 Y4 R5 Y5 G1 G1 G1 G2 G2 G3 G3 G4 G4 G5');
  play(five, 'hint p2 Y', 'hint p1 R');
  assert.equal(five.state.hints, 6);
  for (let i = 0; i < 8; i++) play(five, 'play 1');
  assert.deepEqual(five.state.fireworks, [4, 4, 0]);
  play(five, 'play 1');
  assert.deepEqual([five.state.fireworks[0], five.state.hints], [5, 7]);
});

test('the third fuse ends the game at once with score 0 (bombOut zero) or the fireworks (keep)', () => {
  for (const bombOut of ['zero', 'keep'] as const) {
    const env = dealt('R1 R1 Y2 Y2 Y3 Y3 Y4 Y4 G2 G2 R2 R3 R4 R5 G1 G1 G1', { bombOut });
    const [first] = play(env, 'play 1');
    assert.equal(first!.teamReward, 1);
    const rs = play(env, 'play 1', 'play 1', 'play 1');
    assert.deepEqual(rs.map((r) => r.done), [false, false, true]);
    assert.equal(env.state.fuses, 0);
    assert.ok(env.done && !env.success, 'losing the fuses is not a success');
    assert.ok(env.state.deck.length > 0, 'the game ended with cards left');
    assert.equal(env.score, bombOut === 'zero' ? 0 : 1);
    // The last misplay also took back the points: the team return is the score less the penalties.
    assert.equal(rs[2]!.teamReward, bombOut === 'zero' ? -2 : -1);
    assert.equal(first!.teamReward + rs.reduce((a, r) => a + r.teamReward, 0), env.score - 3);
    assert.throws(() => env.act(env.currentAgent(), 'play 1'), /after the episode ended/);
  }
});

test('completing every firework ends the game at once with the perfect score', () => {
  // Two colours, two players: p1 holds R1-R5, p2 Y1-Y5; the 10th play draws the last card, which
  // would otherwise start a final round of two more acts.
  const env = dealt('R1 Y1 R2 Y2 R3 Y3 R4 Y4 R5 Y5 R1 R1 R2 R3 R4 Y1 Y1 Y2 Y3 Y4', { colours: 2 });
  for (let i = 0; i < 9; i++) assert.equal(play(env, 'play 1')[0]!.done, false);
  const last = play(env, 'play 1')[0]!;
  assert.ok(last.done && last.success);
  assert.equal(env.state.ended, 'perfect');
  assert.equal(env.score, 10);
});

test('after the act that draws the last card every player acts once more, the drawer included', () => {
  for (const players of [2, 3, 4]) {
    const env = hanabi.create(trainSeed(players), { players, colours: 3 });
    let after: number | null = null;
    while (!env.done) {
      const agent = env.currentAgent();
      const hadCards = env.state.deck.length > 0;
      // Mostly the bot, sometimes an act that passes: passes count toward the final round too.
      env.act(agent, after !== null && after % 2 === 1 ? 'pass' : env.solution(agent));
      if (after !== null) after++;
      else if (hadCards && env.state.deck.length === 0) after = 0;
    }
    assert.equal(after, players, `${players} players`);
    assert.equal(env.state.ended, 'deck');
    assert.ok(env.success);
  }
});

test('unreadable and illegal actions pass the turn, change nothing else, and are penalised and counted', () => {
  const env = hanabi.create(5);
  const start = env.state;
  const cases: [string, RegExp | null, RegExp][] = [
    ['', /empty action/, /p1 passes \(unreadable action\)/],
    ['play', /expected play N/, /unreadable/],
    ['play 0', /expected play N/, /unreadable/],
    ['Play 1', /unknown action starting with 'P'/, /unreadable/],
    ['hint p3 R', /no player p3: players are p1-p2/, /unreadable/],
    ['hint p2 red', /expected hint pK C/, /unreadable/],
    ['discard 1 2', /expected discard N/, /unreadable/],
    ['\u0000play 1', /code 0/, /unreadable/],
    ['play 6', null, /there is no card 6 \(your hand has 5\)/],
    ['discard 2', null, /discarding is not allowed/],
    ['hint p1 3', null, /you cannot hint yourself/],
    ['hint p2 W', null, /no such colour in this game/],
  ];
  for (const [text, parseError, info] of cases) {
    const e = env.clone();
    const r = e.act('p1', text);
    if (parseError) {
      assert.match(r.parseError ?? '', parseError, JSON.stringify(text));
      assert.equal(r.localReward, hanabiRewards.malformed);
      assert.deepEqual(e.stats['p1'], { acts: 1, parseErrors: 1, invalidMoves: 0 });
    } else {
      assert.equal(r.parseError, null, text);
      assert.equal(r.localReward, hanabiRewards.illegal);
      assert.deepEqual(e.stats['p1'], { acts: 1, parseErrors: 0, invalidMoves: 1 });
    }
    assert.match(r.info, info, JSON.stringify(text));
    assert.ok(isPrintableText(r.info) && isPrintableText(r.parseError ?? ''));
    assert.equal(r.teamReward, 0);
    assert.equal(e.currentAgent(), 'p2');
    assert.deepEqual({ ...e.state, current: 0 }, start);
    assert.match(e.observe('p2'), /^p1 passed \(invalid action\)$/m);
  }
  // A hint naming a colour or rank the player does not hold touches nothing: illegal.
  const s = env.state;
  const missing = [1, 2, 3, 4, 5].find((r) => !s.hands[1]!.some((c) => c.rank === r));
  if (missing !== undefined) assert.match(env.clone().act('p1', `hint p2 ${missing}`).info, /must name at least one of their cards/);
});

test('a hint that tells something new earns the hinter informativeHint; repeating it earns 0', () => {
  const env = dealt('R1 R2 R3 Y2 Y1 G3 Y4 Y4 G1 G2 R5 Y5 G5 G4');
  // p2 holds R2 Y2 G3 Y4 G2.
  const [first] = play(env, 'hint p2 2');
  assert.deepEqual([first!.localReward, first!.teamReward], [hanabiRewards.informativeHint, 0]);
  assert.match(first!.info, /p1 hinted p2 2: 1 2 5/);
  assert.match(env.observe('p1'), /^p2 knows \?2 \?2 \?\? \?\? \?2$/m);
  assert.match(env.observe('p2'), /^you have \?2 \?2 \?\? \?\? \?2$/m);
  play(env, 'hint p1 R');
  const [again] = play(env, 'hint p2 2');
  assert.equal(again!.localReward, 0);
  // Knowing a colour by elimination counts: three colours, not R and not Y leaves G.
  const elim = dealt('G1 R1 R2 R2 G3 Y3 Y1 Y4 G2 G2 R5 Y5 G5 G4');
  play(elim, 'hint p2 1', 'hint p1 R', 'hint p2 2');
  assert.match(elim.observe('p1'), /^you have \?\? R\? \?\? \?\? \?\?$/m);
  play(elim, 'hint p1 Y');
  assert.match(elim.observe('p1'), /^you have G\? R\? G\? Y\? G\?$/m);
});

test('playableHintReward adds to a hint that tells something new about a card playable now, and to nothing else', () => {
  // p1 holds R1 R3 Y1 Y4 G1 (three playable 1s), p2 R2 Y2 G3 Y4 G2 (nothing playable).
  const draws = 'R1 R2 R3 Y2 Y1 G3 Y4 Y4 G1 G2 R5 Y5 G5 G4';
  const acts = ['hint p2 2', 'hint p1 3', 'hint p2 Y', 'hint p1 1', 'play 1', 'hint p1 1'];
  const plain = play(dealt(draws), ...acts);
  const info = hanabiRewards.informativeHint;
  assert.deepEqual(
    plain.map((r) => [r.localReward, r.teamReward]),
    [[info, 0], [info, 0], [info, 0], [info, 0], [0, 1], [0, 0]],
  );
  const shaped = play(dealt(draws, { playableHintReward: 0.5 }), ...acts);
  // Only the hint naming p1's 1s earns it: 'hint p1 3' tells p1 about R3 alone, though p1 holds
  // playable cards; the repeated 'hint p1 1' tells nothing new; the play's reward is the team's.
  assert.deepEqual(
    shaped.map((r) => [r.localReward, r.teamReward]),
    [[info, 0], [info, 0], [info, 0], [info + 0.5, 0], [0, 1], [0, 0]],
  );
  assert.deepEqual(shaped.map((r) => r.info), plain.map((r) => r.info));
  assert.throws(() => hanabiOptions({ playableHintReward: -1 }), /playableHintReward/);
});

test("a player's prompt and the bot's move never depend on its own cards or the deck order", () => {
  const rng = new Rng(4, 'privacy');
  let checked = 0;
  for (const options of [small, hanabiOptions({ colours: 5, players: 4 }), hanabiOptions({ showLegalMoves: true }), hanabiOptions({ showPlayable: true }), hanabiOptions({ showPlayable: true, colours: 5, players: 3 }), hanabiOptions({ showPlayable: true, playableIdentity: true }), hanabiOptions({ showPlayable: true, playableIdentity: true, colours: 5, players: 3 })]) {
    for (let g = 0; g < 20; g++) {
      const env = hanabi.create(trainSeed(100 + g), options);
      while (!env.done) {
        for (const agent of env.agents) {
          const seat = env.agents.indexOf(agent);
          const state = env.state;
          // Every own card replaced by another identity, and the deck reshuffled.
          const other = { ...state, hands: state.hands.map((h, i) => (i === seat ? h.map((c) => ({ colour: (c.colour + 1 + rng.int(options.colours - 1)) % options.colours, rank: 1 + ((c.rank + rng.int(4)) % 5) })) : h)), deck: rng.shuffle([...state.deck]) };
          const swapped = env.withState(other);
          assert.equal(swapped.observe(agent), env.observe(agent), `${agent}'s prompt shows its own cards`);
          if (agent === env.currentAgent()) assert.equal(swapped.solution(agent), env.solution(agent), "the bot reads its own cards");
          // The others do see the change (so the test can fail).
          const watcher = env.agents[(seat + 1) % env.agents.length]!;
          if (state.hands[seat]!.length > 0) assert.notEqual(swapped.observe(watcher), env.observe(watcher));
          checked++;
        }
        const agent = env.currentAgent();
        env.act(agent, rng.chance(0.5) ? env.solution(agent) : moveText(randomMove(env.state, rng)));
      }
    }
  }
  assert.ok(checked > 2000, `${checked} views checked`);
});

test('prompts are printable and short: the small variant stays well inside the default model context (512)', () => {
  let longest = 0;
  for (let g = 0; g < 500; g++) {
    // The same 100 games plain, with the legal moves listed (showLegalMoves), with the playable line (showPlayable), with both, and with both and the playable cards named (playableIdentity).
    const env = hanabi.create(validationSeed(g % 100), { showLegalMoves: g >= 100 && g < 200 ? true : g >= 300, showPlayable: g >= 200, playableIdentity: g >= 400 });
    while (!env.done) {
      const agent = env.currentAgent();
      const prompt = env.observe(agent);
      assert.ok(isPrintableText(prompt) && prompt.endsWith('\n'));
      longest = Math.max(longest, prompt.length);
      env.act(agent, env.solution(agent));
    }
  }
  assert.ok(longest <= 400, `longest small-variant prompt ${longest} characters`);
});

/** The moves a prompt's legal line lists, as action texts, sorted ('p1 legal: play 1-5, hint p2 R 1' -> play 1 .. play 5, hint p2 R, hint p2 1). */
function listedMoves(prompt: string, agent: string): string[] {
  const line = prompt.trimEnd().split('\n').at(-1)!;
  const m = new RegExp(`^${agent} legal: (.+)$`).exec(line);
  assert.ok(m, `no legal line: ${JSON.stringify(line)}`);
  const out: string[] = [];
  for (const part of m[1]!.split(', ')) {
    const [verb, first, ...rest] = part.split(' ');
    if (verb === 'play' || verb === 'discard') {
      assert.equal(rest.length, 0, part);
      const range = /^1(?:-([2-9]))?$/.exec(first!);
      assert.ok(range, part);
      for (let i = 1; i <= Number(range[1] ?? 1); i++) out.push(`${verb} ${i}`);
    } else {
      assert.equal(verb, 'hint', part);
      assert.ok(rest.length > 0, part);
      for (const what of rest) out.push(`hint ${first} ${what}`);
    }
  }
  return out.sort();
}

/** Every move the grammar can name in this game, legal or not (slots one past the hand, every seat, colour and rank). */
function everyMove(s: GameState): Move[] {
  const out: Move[] = [];
  for (let slot = 0; slot <= s.hands[s.current]!.length; slot++) out.push({ kind: 'play', slot }, { kind: 'discard', slot });
  for (let target = 0; target < s.rules.players; target++) {
    for (let colour = 0; colour < s.rules.colours; colour++) out.push({ kind: 'hint', target, colour, rank: null });
    for (let rank = 1; rank <= RANKS; rank++) out.push({ kind: 'hint', target, colour: null, rank });
  }
  return out;
}

test('showLegalMoves: the last prompt line lists exactly the legal moves; off by default, leaving options and prompts as before', () => {
  // Off: the options parse without the key (so configs and warm-start cache keys stay the same) and the grammar line ends the prompt.
  assert.equal('showLegalMoves' in small, false);
  const plain = hanabi.create(validationSeed(1));
  assert.match(plain.observe('p1'), /\np1: play N, discard N or hint P C\n$/);
  const rng = new Rng(11, 'legal-line');
  let checked = 0;
  let fullTokens = 0;
  let noTokens = 0;
  for (const options of [hanabiOptions({ showLegalMoves: true }), hanabiOptions({ showLegalMoves: true, colours: 5, players: 3 }), hanabiOptions({ showLegalMoves: true, colours: 5, players: 4 })]) {
    for (let g = 0; g < 30; g++) {
      const env = hanabi.create(validationSeed(200 + g), options);
      while (!env.done) {
        const agent = env.currentAgent();
        const s = env.state;
        const listed = listedMoves(env.observe(agent), agent);
        const legal = legalMoves(playerView(s, s.current));
        assert.deepEqual(listed, legal.map(moveText).sort());
        // The enumeration from the view is the rules' own: every move the state's checker accepts, and no other.
        assert.deepEqual(legal.map(moveText).sort(), everyMove(s).filter((m) => illegality(s, m) === null).map(moveText).sort());
        // Every listed move is accepted, and nothing else the parser reads is.
        for (const text of listed) assert.equal(env.clone().act(agent, text).localReward >= 0, true, text);
        if (s.hints === 8) {
          fullTokens++;
          assert.ok(!listed.some((t) => t.startsWith('discard')), 'no discard with all 8 hint tokens');
        }
        if (s.hints === 0) {
          noTokens++;
          assert.ok(!listed.some((t) => t.startsWith('hint')), 'no hint without a token');
        }
        checked++;
        // Mostly the bot, sometimes a random legal move: hints spent down to 0 and hands emptied at the end.
        env.act(agent, rng.chance(0.7) ? env.solution(agent) : moveText(randomMove(s, rng)));
      }
    }
  }
  assert.ok(checked > 2000 && fullTokens > 50 && noTokens > 5, JSON.stringify({ checked, fullTokens, noTokens }));
  // A hand-built deal: p2 holds Y1 Y1 Y3 R3 Y1 (red and yellow, ranks 1 and 3); all 8 tokens, then none.
  const env = dealt('R1 Y1 R3 Y1 G1 Y3 R1 R3 G1 Y1 G2 G2 G3 G3 G4 G4 G5 R2 R2 R4', { showLegalMoves: true });
  assert.equal(env.observe('p1').trimEnd().split('\n').at(-1), 'p1 legal: play 1-5, hint p2 R Y 1 3');
  for (let i = 0; i < 8; i++) play(env, i % 2 === 0 ? 'hint p2 Y' : 'hint p1 R');
  assert.equal(env.state.hints, 0);
  assert.equal(env.observe('p1').trimEnd().split('\n').at(-1), 'p1 legal: play 1-5, discard 1-5');
});

test("showPlayable: the known line names exactly the player's surely playable and useless cards and the others' playable ones; off by default", () => {
  assert.equal('showPlayable' in small, false);
  assert.doesNotMatch(hanabi.create(validationSeed(1)).observe('p1'), /known:/);
  const rng = new Rng(12, 'playable-line');
  let checked = 0;
  let ownPlayable = 0;
  let byNegativeHints = 0;
  let useless = 0;
  for (const options of [hanabiOptions({ showPlayable: true }), hanabiOptions({ showPlayable: true, colours: 5, players: 3 }), hanabiOptions({ showPlayable: true, colours: 5, players: 4 })]) {
    for (let g = 0; g < 30; g++) {
      const env = hanabi.create(validationSeed(300 + g), options);
      while (!env.done) {
        const agent = env.currentAgent();
        const s = env.state;
        const seat = s.current;
        const lines = env.observe(agent).trimEnd().split('\n');
        const at = lines.findIndex((l) => l.startsWith('known: '));
        assert.ok(at > 0 && lines[at - 1]!.startsWith('you have '), 'the known line follows you have');
        const parts = lines[at]!.split('; ');
        const slots = (text: string): number[] => (text === '-' ? [] : text.split(' ').map((t) => Number(t) - 1));
        const m = /^known: play (.+), useless (.+)$/.exec(parts[0]!);
        assert.ok(m, parts[0]);
        const [play, dead] = [slots(m[1]!), slots(m[2]!)];
        // Against the game's knowledge, computed here from the identities each own card may still be.
        const mayBe = (slot: number): Card[] => fullDeck(s.rules.colours).filter((c) => (s.knowledge[seat]![slot]!.colours & (1 << c.colour)) !== 0 && (s.knowledge[seat]![slot]!.ranks & (1 << (c.rank - 1))) !== 0);
        const own = s.hands[seat]!.map((_, i) => i);
        assert.deepEqual(play, own.filter((i) => mayBe(i).every((c) => s.fireworks[c.colour] === c.rank - 1)), `${agent} play ${lines.join(' | ')}`);
        assert.deepEqual(dead, own.filter((i) => mayBe(i).every((c) => c.rank <= s.fireworks[c.colour]!)), `${agent} useless ${lines.join(' | ')}`);
        // What it names is true of the cards themselves.
        for (const i of play) assert.equal(s.fireworks[s.hands[seat]![i]!.colour], s.hands[seat]![i]!.rank - 1);
        for (const i of dead) assert.ok(s.hands[seat]![i]!.rank <= s.fireworks[s.hands[seat]![i]!.colour]!);
        // The others, in turn order: exactly their cards that are the next of their colour.
        const others = Array.from({ length: s.rules.players - 1 }, (_, d) => (seat + 1 + d) % s.rules.players);
        assert.deepEqual(parts.slice(1), others.map((o) => `p${o + 1} playable ${s.hands[o]!.flatMap((c, i) => (s.fireworks[c.colour] === c.rank - 1 ? [String(i + 1)] : [])).join(' ') || '-'}`));
        // The bot plays the first card the line names, and plays only when it names one.
        const bot = env.solution(agent);
        assert.equal(bot.startsWith('play '), play.length > 0);
        if (play.length > 0) assert.equal(bot, `play ${play[0]! + 1}`);
        ownPlayable += play.length;
        useless += dead.length;
        // Known playable although the prompt's own cards do not show both colour and rank: negative hints decided it.
        const shown = lines[at - 1]!.slice('you have '.length).split(' ');
        byNegativeHints += play.filter((i) => shown[i]!.includes('?')).length;
        checked++;
        env.act(agent, rng.chance(0.8) ? env.solution(agent) : moveText(randomMove(s, rng)));
      }
    }
  }
  assert.ok(checked > 2000 && ownPlayable > 300 && byNegativeHints > 20 && useless > 50, JSON.stringify({ checked, ownPlayable, byNegativeHints, useless }));
  // A hand-built deal: fireworks empty, so every 1 is playable; p2 holds Y1 Y1 Y3 R3 Y1.
  const env = dealt('R1 Y1 R3 Y1 G1 Y3 R1 R3 G1 Y1 G2 G2 G3 G3 G4 G4 G5 R2 R2 R4', { showPlayable: true });
  assert.match(env.observe('p1'), /\nyou have \?\? \?\? \?\? \?\? \?\?\nknown: play -, useless -; p2 playable 1 2 5\np1: play N, discard N or hint P C\n$/);
  play(env, 'hint p2 1');
  assert.match(env.observe('p2'), /\nknown: play 1 2 5, useless -; p1 playable 1 3 4 5\n/);
});

test("playableIdentity: the others' playable cards are named by their identity and slot, as their hands show them, and carry the bot's hint; needs showPlayable", () => {
  assert.equal('playableIdentity' in small, false);
  assert.throws(() => hanabi.create(validationSeed(1), { playableIdentity: true }), /showPlayable/);
  const rng = new Rng(13, 'playable-identity');
  let checked = 0;
  let named = 0;
  let botHints = 0;
  for (const options of [hanabiOptions({ showPlayable: true, playableIdentity: true }), hanabiOptions({ showPlayable: true, playableIdentity: true, colours: 5, players: 3 }), hanabiOptions({ showPlayable: true, playableIdentity: true, showLegalMoves: true, colours: 5, players: 4 })]) {
    for (let g = 0; g < 30; g++) {
      const env = hanabi.create(validationSeed(400 + g), options);
      const plain = hanabi.create(validationSeed(400 + g), { ...options, playableIdentity: false });
      while (!env.done) {
        const agent = env.currentAgent();
        const s = env.state;
        const seat = s.current;
        const lines = env.observe(agent).trimEnd().split('\n');
        const parts = lines.find((l) => l.startsWith('known: '))!.split('; ');
        // The own part is the plain line's; only the others' parts change.
        const plainParts = plain.observe(agent).trimEnd().split('\n').find((l) => l.startsWith('known: '))!.split('; ');
        assert.equal(parts[0], plainParts[0]);
        const others = Array.from({ length: s.rules.players - 1 }, (_, d) => (seat + 1 + d) % s.rules.players);
        assert.equal(parts.length, others.length + 1);
        for (const [n, o] of others.entries()) {
          const m = new RegExp(`^p${o + 1} playable (.+)$`).exec(parts[n + 1]!);
          assert.ok(m, parts[n + 1]);
          const listed = m[1] === '-' ? [] : m[1]!.split(', ').map((t) => /^([RYGWB][1-5]) at ([1-5])$/.exec(t)!);
          assert.ok(listed.every((x) => x !== null), m[1]);
          // Exactly the cards of that hand that are the next of their colour, in slot order, each as the hand shows it.
          assert.deepEqual(listed.map((x) => Number(x[2]) - 1), s.hands[o]!.flatMap((c, i) => (s.fireworks[c.colour] === c.rank - 1 ? [i] : [])));
          const shown = lines.find((l) => l.startsWith(`p${o + 1} has `))!.slice(`p${o + 1} has `.length).split(' ');
          for (const x of listed) {
            assert.equal(x[1], cardText(s.hands[o]![Number(x[2]) - 1]!));
            assert.equal(x[1], shown[Number(x[2]) - 1]);
          }
          // The plain line names the same slots.
          assert.equal(plainParts[n + 1], `p${o + 1} playable ${listed.map((x) => x[2]).join(' ') || '-'}`);
          named += listed.length;
        }
        // The bot's hint below the token maximum (its rule 2: a playable card its holder does not know) names a colour or rank of a card the line names.
        const bot = env.solution(agent);
        const hint = /^hint p(\d) (.)$/.exec(bot);
        if (hint && s.hints < s.rules.hintTokens) {
          const part = parts.find((p) => p.startsWith(`p${hint[1]} playable `))!;
          assert.ok(part.slice(`p${hint[1]} playable `.length).split(', ').some((t) => t.slice(0, 2).includes(hint[2]!)), `${bot} | ${part}`);
          botHints++;
        }
        checked++;
        const move = rng.chance(0.8) ? env.solution(agent) : moveText(randomMove(s, rng));
        env.act(agent, move);
        plain.act(agent, move);
      }
    }
  }
  assert.ok(checked > 2000 && named > 1000 && botHints > 200, JSON.stringify({ checked, named, botHints }));
  // The hand-built deal of the showPlayable test: p2 holds Y1 Y1 Y3 R3 Y1 and every 1 is playable.
  const env = dealt('R1 Y1 R3 Y1 G1 Y3 R1 R3 G1 Y1 G2 G2 G3 G3 G4 G4 G5 R2 R2 R4', { showPlayable: true, playableIdentity: true });
  assert.match(env.observe('p1'), /\nknown: play -, useless -; p2 playable Y1 at 1, Y1 at 2, Y1 at 5\np1: play N, discard N or hint P C\n$/);
  play(env, 'hint p2 1', 'play 1');
  assert.match(env.observe('p1'), /\nknown: play -, useless -; p2 playable -\n/);
});

test('the parser reads exactly the documented grammar', () => {
  assert.deepEqual(parseMove(' play 3\n', 2), { ok: true, action: { kind: 'play', slot: 2 } });
  assert.deepEqual(parseMove('discard 1', 2), { ok: true, action: { kind: 'discard', slot: 0 } });
  assert.deepEqual(parseMove('hint p2 G', 2), { ok: true, action: { kind: 'hint', target: 1, colour: 2, rank: null } });
  assert.deepEqual(parseMove('hint p4 5', 4), { ok: true, action: { kind: 'hint', target: 3, colour: null, rank: 5 } });
  for (const bad of ['play  1', 'play one', 'hint 2 G', 'hint p2 g', 'hint p2 6', 'hint p2 RG', 'discard', 'hint p5 R']) {
    assert.equal(parseMove(bad, 4).ok, false, bad);
  }
  for (const m of [{ kind: 'play', slot: 0 }, { kind: 'hint', target: 2, colour: 4, rank: null }, { kind: 'hint', target: 0, colour: null, rank: 3 }] as const) {
    assert.deepEqual(parseMove(moveText(m), 5), { ok: true, action: m });
  }
});

test('the convention bot scores well above random play and never loses a fuse (small variant)', () => {
  const games = 200;
  let bot = 0;
  let random = 0;
  const rng = new Rng(9, 'random-player');
  for (let g = 0; g < games; g++) {
    const env = hanabi.create(validationSeed(1000 + g));
    let teamReturn = 0;
    while (!env.done) teamReturn += env.act(env.currentAgent(), env.solution(env.currentAgent())).teamReward;
    assert.equal(env.state.fuses, 3);
    assert.ok(env.success);
    assert.ok(Math.abs(teamReturn - env.score) < 1e-9, 'without misplays the team return is the score');
    bot += env.score;
    const r = hanabi.create(validationSeed(1000 + g));
    while (!r.done) r.act(r.currentAgent(), moveText(randomMove(r.state, rng)));
    random += r.score;
  }
  bot /= games;
  random /= games;
  assert.ok(bot >= 10, `bot mean score ${bot} of 15`);
  assert.ok(random <= 1, `random mean score ${random}`);
});

test('with scripted seats the bot plays its seats and the policy the rest; team rewards include the bot acts', () => {
  for (const scripted of [['p2'], ['p1']]) {
    const env = new ScriptedSeats(hanabi.create(validationSeed(3)), scripted);
    assert.deepEqual(env.agents, scripted[0] === 'p2' ? ['p1'] : ['p2']);
    const me = env.agents[0]!;
    assert.equal(env.currentAgent(), me, 'the bot acted first where it sits first');
    let team = 0;
    while (!env.done) {
      assert.equal(env.currentAgent(), me);
      team += env.act(me, env.solution(me)).teamReward;
    }
    // Bot and bot-as-policy together play exactly the bot's self-play game.
    const self = hanabi.create(validationSeed(3));
    while (!self.done) self.act(self.currentAgent(), self.solution(self.currentAgent()));
    assert.equal(env.score, self.score);
    if (scripted[0] === 'p2') assert.equal(team, self.score);
    assert.deepEqual(Object.keys(env.stats), [me]);
  }
  assert.throws(() => new ScriptedSeats(hanabi.create(1), ['p1', 'p2']), /every agent is scripted/);
});
