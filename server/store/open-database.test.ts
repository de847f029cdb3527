import assert from 'node:assert/strict';
import { closeSync, existsSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { defaultDatabasePath, openRunStore, RunStoreError, SCHEMA_VERSION } from './index.ts';
import { BUSY_TIMEOUT_MS } from './open-database.ts';
import { migrations, TROUPE_APPLICATION_ID } from './schema-migrations.ts';
import { sampleStep } from './testing/sample-step.ts';
import { tempDir } from './testing/temp-dir.ts';

/** Asserts a RunStoreError with this code whose message names the file. */
function assertStoreError(fn: () => unknown, code: RunStoreError['code'], file: string, pattern: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof RunStoreError, `expected RunStoreError, got ${String(error)}`);
    assert.equal(error.code, code);
    assert.ok(error.message.includes(file), `message should name ${file}: ${error.message}`);
    assert.match(error.message, pattern);
    return true;
  });
}

test('the default database lives at <workspace>/.troupe/troupe.db and its folder is created', () => {
  const workspace = tempDir();
  const path = defaultDatabasePath(workspace);
  assert.equal(path, join(workspace, '.troupe', 'troupe.db'));
  const store = openRunStore(path);
  store.close();
  assert.ok(existsSync(path));
});

test('a new store is in WAL mode and stamped with the Troupe application id and schema version', () => {
  const path = join(tempDir(), 'troupe.db');
  const store = openRunStore(path);
  const run = store.createRun({ name: 'wal', config: {} });
  store.commitStep(run.id, sampleStep({ step: 1 }));
  assert.ok(existsSync(`${path}-wal`), 'writes go to the write-ahead log');

  // journal_mode=WAL, user_version and application_id persist in the file: a second connection sees them.
  const raw = new Database(path, { readonly: true });
  assert.equal(raw.pragma('journal_mode', { simple: true }), 'wal');
  assert.equal(raw.pragma('user_version', { simple: true }), SCHEMA_VERSION);
  assert.equal(raw.pragma('application_id', { simple: true }), TROUPE_APPLICATION_ID);
  const applied = raw.prepare('SELECT version, name FROM schema_migrations ORDER BY version').all();
  assert.equal(applied.length, SCHEMA_VERSION);
  raw.close();
  store.close();
});

test('the store connection runs with foreign keys, a busy timeout and synchronous=FULL', () => {
  const path = join(tempDir(), 'troupe.db');
  const store = openRunStore(path);
  assert.deepEqual(store.settings(), {
    journalMode: 'wal',
    foreignKeys: true,
    busyTimeoutMs: BUSY_TIMEOUT_MS,
    synchronous: 'full',
    schemaVersion: SCHEMA_VERSION,
  });
  // Foreign keys at work: deleting a run cascades to every row of it.
  const run = store.createRun({ name: 'fk', config: {} });
  store.commitStep(run.id, sampleStep({ step: 1 }));
  assert.equal(store.deleteRun(run.id), true);
  assert.deepEqual(store.checkIntegrity(), []);
  store.close();
  const raw = new Database(path, { readonly: true });
  const leftovers = raw.prepare('SELECT (SELECT count(*) FROM turns) + (SELECT count(*) FROM metrics) + (SELECT count(*) FROM steps) + (SELECT count(*) FROM metric_series) AS n').get();
  assert.deepEqual(leftovers, { n: 0 });
  raw.close();
});

test('reopening keeps the data and does not migrate again', () => {
  const path = join(tempDir(), 'troupe.db');
  const first = openRunStore(path);
  const run = first.createRun({ name: 'persist', config: { lr: 1e-4 } });
  first.commitStep(run.id, sampleStep({ step: 3 }));
  first.close();
  const second = openRunStore(path);
  assert.equal(second.lastCommittedStep(run.id), 3);
  assert.deepEqual(second.getRun(run.id)?.config, { lr: 1e-4 });
  second.close();
  const raw = new Database(path, { readonly: true });
  assert.deepEqual(raw.prepare('SELECT count(*) AS n FROM schema_migrations').get(), { n: SCHEMA_VERSION });
  raw.close();
});

test('a file that is not SQLite gives a clear error naming it', () => {
  const dir = tempDir();
  const garbage = join(dir, 'garbage.db');
  writeFileSync(garbage, Buffer.alloc(8192, 0x5a));
  assertStoreError(() => openRunStore(garbage), 'corrupt', garbage, /not a valid Troupe run store: file is not a database/);
  const text = join(dir, 'notes.db');
  writeFileSync(text, 'just some notes\n');
  assertStoreError(() => openRunStore(text), 'corrupt', text, /file is not a database/);
});

test('a Troupe database with a damaged schema page gives a clear error naming it', () => {
  const path = join(tempDir(), 'troupe.db');
  const store = openRunStore(path);
  const run = store.createRun({ name: 'doomed', config: {} });
  store.commitStep(run.id, sampleStep({ step: 1 }));
  store.close();
  // Bytes 100.. of page 1 hold the schema table's b-tree; the 100-byte header stays valid.
  const fd = openSync(path, 'r+');
  writeSync(fd, Buffer.alloc(3000, 0x77), 0, 3000, 100);
  closeSync(fd);
  assertStoreError(() => openRunStore(path), 'corrupt', path, /malformed/);
});

test('an SQLite database that is not Troupe\'s is refused, not migrated', () => {
  const path = join(tempDir(), 'other.db');
  const raw = new Database(path);
  raw.exec('CREATE TABLE notes (body TEXT)');
  raw.close();
  assertStoreError(() => openRunStore(path), 'foreign-database', path, /not a Troupe run store/);
  const check = new Database(path, { readonly: true });
  assert.deepEqual(check.prepare("SELECT name FROM sqlite_schema WHERE type = 'table'").all(), [{ name: 'notes' }]);
  check.close();
});

test('a database from a newer schema is refused with both versions named', () => {
  const path = join(tempDir(), 'troupe.db');
  openRunStore(path).close();
  const raw = new Database(path);
  raw.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
  raw.close();
  assertStoreError(() => openRunStore(path), 'newer-schema', path, new RegExp(`version ${SCHEMA_VERSION + 1}.*up to ${SCHEMA_VERSION}`));
});

test('two stores on one file see each other\'s commits (WAL readers beside a writer)', () => {
  const path = join(tempDir(), 'troupe.db');
  const writer = openRunStore(path);
  const reader = openRunStore(path);
  const run = writer.createRun({ name: 'shared', config: {} });
  writer.commitStep(run.id, sampleStep({ step: 1 }));
  assert.equal(reader.lastCommittedStep(run.id), 1);
  assert.equal(reader.listTrajectories({ runId: run.id, step: 1 }).length, 5);
  reader.close();
  writer.close();
});

test('a path that cannot hold a database gives an open-failed error naming it', () => {
  const dir = tempDir();
  assertStoreError(() => openRunStore(dir), 'open-failed', dir, /cannot open run store/);
  const blocker = join(dir, 'file');
  writeFileSync(blocker, '');
  const nested = join(blocker, 'troupe.db');
  assertStoreError(() => openRunStore(nested), 'open-failed', nested, /cannot create the folder/);
});

test('a version-1 database is migrated in place: its runs keep their rows and get no target step', () => {
  const path = join(tempDir(), 'troupe.db');
  const raw = new Database(path);
  raw.pragma(`application_id = ${TROUPE_APPLICATION_ID}`);
  raw.exec(migrations[0]!.sql);
  raw.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (1, ?, 0)').run(migrations[0]!.name);
  raw.pragma('user_version = 1');
  raw.prepare("INSERT INTO runs (id, name, state, config, run_dir, created_at, updated_at) VALUES ('old', 'old run', 'done', '{}', 'runs/old', 1, 1)").run();
  raw.close();

  const store = openRunStore(path);
  const old = store.getRun('old');
  assert.equal(old?.name, 'old run');
  assert.equal(old?.targetSteps, null);
  const fresh = store.createRun({ name: 'new', config: {}, targetSteps: 60 });
  assert.equal(fresh.targetSteps, 60);
  assert.equal(store.setRunTargetSteps(fresh.id, 80).targetSteps, 80);
  assert.throws(() => store.setRunTargetSteps(fresh.id, 0), /steps must be an integer >= 1/);
  store.close();
});

test('garbage in a data page that opening does not read is found by quick_check at open, naming the file', () => {
  const path = join(tempDir(), 'troupe.db');
  const store = openRunStore(path);
  const run = store.createRun({ name: 'doomed', config: {} });
  for (let step = 1; step <= 20; step++) store.commitStep(run.id, sampleStep({ step }));
  store.close();
  // Checkpoint the WAL into the main file, then overwrite the middle of the file (past the schema pages).
  const db = new Database(path);
  db.pragma('wal_checkpoint(TRUNCATE)');
  const pages = Number(db.pragma('page_count', { simple: true }));
  const pageSize = Number(db.pragma('page_size', { simple: true }));
  db.close();
  assert.ok(pages > 6, `only ${pages} pages`);
  const fd = openSync(path, 'r+');
  writeSync(fd, Buffer.alloc(pageSize * 2, 0x5a), 0, pageSize * 2, pageSize * Math.floor(pages / 2));
  closeSync(fd);
  assertStoreError(() => openRunStore(path), 'corrupt', path, /corrupted \(SQLite quick_check: /);
});

test('a query-only connection reads beside the writer, sees its commits, refuses writes, and never creates a store', () => {
  const path = join(tempDir(), 'troupe.db');
  assertStoreError(() => openRunStore(path, { queryOnly: true }), 'open-failed', path, /cannot open run store/);
  assert.ok(!existsSync(path), 'a query-only open creates nothing');
  const writer = openRunStore(path);
  const run = writer.createRun({ name: 'reader', config: {} });
  const reader = openRunStore(path, { queryOnly: true });
  try {
    writer.commitStep(run.id, sampleStep({ step: 1 }));
    assert.deepEqual(reader.listSteps(run.id).map((s) => s.step), [1]);
    assert.throws(() => reader.createRun({ name: 'no', config: {} }), /readonly|read-only|query_only/i);
  } finally {
    reader.close();
    writer.close();
  }
});
