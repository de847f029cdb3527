/**
 * The run store's schema, as an ordered list of migrations. `PRAGMA user_version` holds the version
 * a database is at and `schema_migrations` records when each step was applied; `PRAGMA
 * application_id` marks the file as Troupe's, so opening some other SQLite file fails instead of
 * "migrating" it. To change the schema, append a migration — never edit a released one.
 *
 * Design notes that the queries rely on:
 * - Tables are STRICT, so a column holds only its declared type and rows can be read without
 *   re-validating every value; enumerations are CHECK-constrained to the protocol's enums.
 * - A step's rows (groups, trajectories → turns) hang off `steps` with ON DELETE CASCADE, so
 *   replacing or rewinding a step is one DELETE. Metrics are keyed by series instead (see below) and
 *   deleted explicitly.
 * - Metrics are long and narrow: `metric_series` names each (run, name, agent, policy) once and
 *   `metrics` holds (series, step, value) clustered by its primary key, so a chart's series is one
 *   range scan and the latest value of a series one index seek. '' stands for "no agent" / "no
 *   policy" because UNIQUE treats NULLs as distinct.
 * - Token ids and log-probabilities are BLOBs of little-endian Int32 / Float32 (blob-codec.ts).
 * - Trajectory, turn and checkpoint ids are AUTOINCREMENT: the editor keeps them in open documents
 *   (`troupe:` URIs), and a replaced or rewound step must not hand its ids to different rows.
 */
import type Database from 'better-sqlite3';
import { RunStoreError } from './store-error.ts';

/** 'TRUP' — written to the SQLite header so a Troupe database is recognisable. */
export const TROUPE_APPLICATION_ID = 0x54525550;

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

export const migrations: readonly Migration[] = [
  {
    version: 1,
    name: 'initial run store',
    sql: `
CREATE TABLE schema_migrations (
  version    INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  applied_at INTEGER NOT NULL
) STRICT;

CREATE TABLE runs (
  id                  TEXT PRIMARY KEY,
  name                TEXT NOT NULL,
  state               TEXT NOT NULL CHECK (state IN ('queued', 'running', 'paused', 'stopping', 'done', 'failed')),
  config              TEXT NOT NULL CHECK (json_valid(config)),
  run_dir             TEXT NOT NULL,
  last_committed_step INTEGER,
  error               TEXT,
  created_at          INTEGER NOT NULL,
  updated_at          INTEGER NOT NULL
) STRICT;
CREATE INDEX runs_by_created ON runs (created_at);

CREATE TABLE steps (
  run_id               TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step                 INTEGER NOT NULL,
  timings              TEXT NOT NULL CHECK (json_valid(timings)),
  trajectory_count     INTEGER NOT NULL,
  success_count        INTEGER NOT NULL,
  turn_count           INTEGER NOT NULL,
  prompt_token_count   INTEGER NOT NULL,
  response_token_count INTEGER NOT NULL,
  created_at           INTEGER NOT NULL,
  PRIMARY KEY (run_id, step)
) STRICT, WITHOUT ROWID;

CREATE TABLE metric_series (
  id        INTEGER PRIMARY KEY,
  run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  name      TEXT NOT NULL,
  agent_id  TEXT NOT NULL DEFAULT '',
  policy_id TEXT NOT NULL DEFAULT '',
  UNIQUE (run_id, name, agent_id, policy_id)
) STRICT;

CREATE TABLE metrics (
  series_id INTEGER NOT NULL REFERENCES metric_series (id) ON DELETE CASCADE,
  step      INTEGER NOT NULL,
  value     REAL NOT NULL,
  PRIMARY KEY (series_id, step)
) STRICT, WITHOUT ROWID;

CREATE TABLE groups (
  id           INTEGER PRIMARY KEY,
  run_id       TEXT NOT NULL,
  step         INTEGER NOT NULL,
  group_key    TEXT NOT NULL,
  env_instance INTEGER NOT NULL,
  agent_id     TEXT NOT NULL,
  turn         INTEGER NOT NULL,
  size         INTEGER NOT NULL CHECK (size >= 1),
  reward_mean  REAL NOT NULL,
  reward_std   REAL NOT NULL,
  FOREIGN KEY (run_id, step) REFERENCES steps (run_id, step) ON DELETE CASCADE,
  UNIQUE (run_id, step, group_key)
) STRICT;

CREATE TABLE trajectories (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id       TEXT NOT NULL,
  step         INTEGER NOT NULL,
  phase        TEXT NOT NULL CHECK (phase IN ('train', 'validation')),
  env_name     TEXT NOT NULL,
  env_seed     INTEGER NOT NULL,
  env_instance INTEGER NOT NULL,
  rollout      INTEGER NOT NULL,
  success      INTEGER NOT NULL CHECK (success IN (0, 1)),
  team_reward  REAL NOT NULL,
  local_reward REAL NOT NULL,
  turn_count   INTEGER NOT NULL,
  FOREIGN KEY (run_id, step) REFERENCES steps (run_id, step) ON DELETE CASCADE,
  UNIQUE (run_id, step, phase, env_instance, rollout)
) STRICT;
-- "The same task at step 10 and at step 200": one seed followed through training. The trailing
-- columns match the listing's ORDER BY, so the planner prefers this index without statistics.
CREATE INDEX trajectories_by_seed ON trajectories (run_id, env_seed, step, phase, env_instance, rollout);

CREATE TABLE turns (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  trajectory_id   INTEGER NOT NULL REFERENCES trajectories (id) ON DELETE CASCADE,
  ordinal         INTEGER NOT NULL,
  turn            INTEGER NOT NULL,
  agent_id        TEXT NOT NULL,
  policy_id       TEXT NOT NULL,
  branch          INTEGER NOT NULL,
  kept            INTEGER NOT NULL CHECK (kept IN (0, 1)),
  prompt_text     TEXT NOT NULL,
  response_text   TEXT NOT NULL,
  prompt_tokens   BLOB NOT NULL,
  response_tokens BLOB NOT NULL,
  logprobs        BLOB NOT NULL CHECK (length(logprobs) = length(response_tokens)),
  team_reward     REAL NOT NULL,
  local_reward    REAL NOT NULL,
  reward          REAL NOT NULL,
  advantage       REAL,
  group_id        INTEGER REFERENCES groups (id) ON DELETE CASCADE,
  parse_error     TEXT,
  UNIQUE (trajectory_id, ordinal)
) STRICT;
-- Sibling lookup: the other samples of a group, wherever they are, in display order.
CREATE INDEX turns_by_group ON turns (group_id, trajectory_id, branch) WHERE group_id IS NOT NULL;

CREATE TABLE checkpoints (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step       INTEGER NOT NULL,
  kind       TEXT NOT NULL CHECK (kind IN ('warmstart', 'rl', 'final')),
  policy_id  TEXT,
  path       TEXT NOT NULL,
  meta       TEXT CHECK (meta IS NULL OR json_valid(meta)),
  created_at INTEGER NOT NULL,
  UNIQUE (run_id, path)
) STRICT;
CREATE INDEX checkpoints_by_step ON checkpoints (run_id, step);
`,
  },
  {
    version: 2,
    name: 'runs record their target step',
    // Nullable: runs created before version 2 have no record of it (their run.json does).
    sql: `ALTER TABLE runs ADD COLUMN target_steps INTEGER CHECK (target_steps IS NULL OR target_steps > 0);`,
  },
  {
    version: 3,
    name: 'turns record the programs they ran',
    // A JSON array of protocol Executions on the turn row rather than a table of its own: executions
    // are only ever read whole, with their turn, never queried or joined on, so a column keeps the
    // turn readers at one indexed query, and the turn's ON DELETE CASCADE covers them. NULL when the
    // act ran no program (every turn written before version 3). The reader parses it with the
    // protocol's zod schema, since json_valid only proves it is JSON.
    sql: `ALTER TABLE turns ADD COLUMN executions TEXT CHECK (executions IS NULL OR json_valid(executions));`,
  },
];

/** The schema version this build writes. */
export const SCHEMA_VERSION = migrations.reduce((v, m) => Math.max(v, m.version), 0);

/**
 * Brings a database to SCHEMA_VERSION. An up-to-date database is only read. Otherwise the work runs
 * in an IMMEDIATE transaction (taking the write lock first) and re-checks the version inside it, so
 * two processes opening the same fresh file cannot both initialise it: the second waits on the busy
 * timeout, then finds the version the first one wrote.
 */
export function migrate(db: Database.Database, file: string, now: () => number = Date.now): void {
  if (checkIdentity(db, file) === SCHEMA_VERSION) return;
  const run = db.transaction(() => {
    const current = checkIdentity(db, file);
    if (current === 0) db.pragma(`application_id = ${TROUPE_APPLICATION_ID}`);
    for (const m of migrations) {
      if (m.version <= current) continue;
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, now());
      // PRAGMA arguments cannot be bound; both values are integers from this file.
      db.pragma(`user_version = ${m.version}`);
    }
  });
  run.immediate();
}

/**
 * Returns the schema version of a Troupe database (0 for a brand-new empty file), or throws when the
 * file belongs to something else or to a newer Troupe.
 */
function checkIdentity(db: Database.Database, file: string): number {
  const applicationId = Number(db.pragma('application_id', { simple: true }));
  const version = Number(db.pragma('user_version', { simple: true }));
  if (applicationId === TROUPE_APPLICATION_ID) {
    if (version > SCHEMA_VERSION) {
      throw new RunStoreError(
        'newer-schema',
        `${file} has run store schema version ${version}, but this build of Troupe knows versions up to ${SCHEMA_VERSION}; update Troupe to open it`,
      );
    }
    return version;
  }
  const objects = Number(db.prepare('SELECT count(*) FROM sqlite_schema').pluck().get());
  if (applicationId === 0 && version === 0 && objects === 0) return 0;
  throw new RunStoreError(
    'foreign-database',
    `${file} is an SQLite database but not a Troupe run store (application_id ${applicationId}, ${objects} schema objects); refusing to modify it`,
  );
}
