/**
 * The replay hanabi-acts.ts and hanabi-bot-agree.ts read a store with: its Hanabi runs, and each
 * run's stored games of a phase at a step re-dealt from their seeds with the run's env options,
 * their kept acts handed over one at a time, before each is played.
 */
import { hanabi, type HanabiEnvironment } from '../../server/envs/hanabi/hanabi-env.ts';
import type { RunStore } from '../../server/store/index.ts';

/** The config fields the scripts read. */
export interface HanabiRunConfig {
  readonly seed?: number;
  readonly env?: { readonly name?: string; readonly options?: unknown };
}

/** The store's Hanabi runs, in its order. */
export function* hanabiRuns(store: RunStore): Generator<{ readonly id: string; readonly name: string; readonly config: HanabiRunConfig }> {
  for (const summary of store.listRuns()) {
    const run = store.getRun(summary.id)!;
    const config = run.config as HanabiRunConfig;
    if (config.env?.name === 'hanabi') yield { id: run.id, name: run.name, config };
  }
}

/** One stored act about to be replayed: who acted, and its answer. */
export interface StoredAct {
  readonly agent: string;
  readonly response: string;
}

/**
 * Replays the run's stored games of `phase` at `step`: each is re-dealt from its seed, and for
 * every kept act `onAct(env, act)` is called with the game as it stands before the act; the
 * callback plays it (`env.act`). The replayed prompt must equal the stored one, else the store and
 * the environment disagree and this throws. `onGame(env)` is called once each game's acts are
 * played. Returns the number of games.
 */
export function replayGames(
  store: RunStore,
  run: { readonly id: string; readonly config: HanabiRunConfig },
  step: number,
  phase: 'validation' | 'train',
  onAct: (env: HanabiEnvironment, act: StoredAct) => void,
  onGame: (env: HanabiEnvironment) => void = () => {},
): number {
  let games = 0;
  for (let offset = 0; ; offset += 500) {
    const page = store.listTrajectories({ runId: run.id, step, phase, limit: 500, offset });
    for (const g of page) {
      const env = hanabi.create(g.envSeed, run.config.env?.options);
      games++;
      // The kept path, act by act (each turn's siblings are the branches it was chosen among).
      store.getTrajectory(g.id)!.turns.forEach((kept, i) => {
        const where = `run ${run.id} game ${g.id} (seed ${g.envSeed})`;
        if (env.done) throw new Error(`${where}: a stored act after the game ended`);
        if (env.observe(kept.agentId) !== kept.promptText) throw new Error(`${where}: the replayed prompt differs from the stored one at act ${i + 1}:\n${env.observe(kept.agentId)}---\n${kept.promptText}`);
        onAct(env, { agent: kept.agentId, response: kept.responseText });
      });
      onGame(env);
    }
    if (page.length < 500) return games;
  }
}
