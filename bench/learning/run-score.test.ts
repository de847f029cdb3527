import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { measureUnits, score, scoreMetric, unitsOf } from './run-score.ts';

const minimax = { minimax: { nonLossRate: 0.75 } } as unknown as NonNullable<Parameters<typeof score>[0]['opponents']>;

describe('run score', () => {
  it('judges a scored game (Hanabi) by its self-play score in points, not by success', () => {
    const hanabi = { success: 1, score: 9.5 };
    assert.equal(scoreMetric(hanabi), 'self-play score');
    assert.equal(score(hanabi), 9.5);
  });

  it('judges tic-tac-toe by the non-loss rate against minimax, the rest by success', () => {
    assert.equal(scoreMetric({ success: 1, opponents: minimax }), 'non-loss vs minimax');
    assert.equal(score({ success: 1, opponents: minimax }), 0.75);
    assert.equal(scoreMetric({ success: 0.5 }), 'success');
    assert.equal(score({ success: 0.5 }), 0.5);
  });

  it('prints points as points and fractions as percentages', () => {
    const pts = unitsOf('self-play score');
    assert.equal(pts.level(11.425), '11.43');
    assert.equal(pts.diff(2), '+2.00');
    assert.equal(pts.diff(-0.5), '-0.50');
    const frac = unitsOf('success');
    assert.equal(frac.level(0.5), '50.0%');
    assert.equal(frac.size(0.031), '3.1');
    assert.equal(frac.diff(0.1), '+10.0');
    // Runs stored before metrics were recorded are success runs.
    assert.equal(unitsOf(undefined).level(0.25), '25.0%');
  });

  it('gives each compared measure its units: the score with the bot in points, tic-tac-toe rates as fractions', () => {
    assert.equal(measureUnits('testAfter', 'self-play score').diff(1.5), '+1.50');
    assert.equal(measureUnits('withBot', 'self-play score').level(7), '7.00');
    assert.equal(measureUnits('vsRandom', 'non-loss vs minimax').level(0.5), '50.0%');
    assert.equal(measureUnits('testAfter', 'non-loss vs minimax').level(0.5), '50.0%');
  });
});
