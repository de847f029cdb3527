/**
 * The path rule on a real file system: a sibling folder whose name extends the workspace's
 * (`/ws` and `/ws-evil`) is outside, `..` is folded before the check, the workspace itself and an
 * allowed folder itself are inside, a link out of the workspace is refused, and `.troupe/` (the
 * store folder) is never written, itself included.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { STORE_DIR_NAME } from '../store/index.ts';
import { ClientPathError, PathConfinement } from './path-confinement.ts';

let top = '';
let ws = '';
let evil = '';
let allowed = '';
let rule: PathConfinement;

before(async () => {
  top = await realpath(await mkdtemp(join(tmpdir(), 'troupe-confine-')));
  ws = join(top, 'ws');
  evil = join(top, 'ws-evil');
  allowed = join(top, 'shared');
  for (const d of [ws, evil, allowed, join(allowed + '-evil'), join(ws, 'sub'), join(ws, STORE_DIR_NAME)]) await mkdir(d, { recursive: true });
  await writeFile(join(ws, 'sub', 'ok.json'), '{}');
  await writeFile(join(evil, 'secret.json'), '{}');
  await writeFile(join(allowed + '-evil', 'secret.json'), '{}');
  await symlink(evil, join(ws, 'to-evil'));
  await symlink(join(ws, 'sub'), join(ws, 'to-sub'));
  rule = await PathConfinement.create(ws, [allowed]);
});

after(async () => {
  await rm(top, { recursive: true, force: true });
});

const refused = async (path: string, why: RegExp, o: { write?: boolean } = {}) => {
  await assert.rejects(rule.resolve(path, 'params.path', o), (e: unknown) => e instanceof ClientPathError && e.field === 'params.path' && why.test(e.message));
};

test('a sibling folder whose name starts with the workspace\'s is outside', async () => {
  await refused(join(evil, 'secret.json'), /is outside the workspace/);
  await refused('../ws-evil/secret.json', /is outside the workspace/);
  // The same for an allowed folder's sibling.
  await refused(join(allowed + '-evil', 'secret.json'), /is outside the workspace/);
});

test('.. is folded before the check: out and back in is inside, out is outside', async () => {
  assert.equal(await rule.resolve('sub/../sub/ok.json', 'f'), join(ws, 'sub', 'ok.json'));
  assert.equal(await rule.resolve(join(ws, 'sub', '..', 'sub', 'ok.json'), 'f'), join(ws, 'sub', 'ok.json'));
  await refused('..', /is outside the workspace/);
  await refused('sub/../../ws-evil/secret.json', /is outside the workspace/);
  await refused(join(ws, '..', 'ws-evil'), /is outside the workspace/);
});

test('the workspace itself and an allowed folder itself are inside', async () => {
  assert.equal(await rule.resolve('.', 'f'), ws);
  assert.equal(await rule.resolve(ws, 'f'), ws);
  assert.equal(await rule.resolve(`${ws}/`, 'f'), ws);
  assert.equal(await rule.resolve(allowed, 'f', { write: true }), allowed);
  assert.equal(await rule.resolve(join(allowed, 'new', 'folder'), 'f', { write: true }), join(allowed, 'new', 'folder'));
});

test('a link inside the workspace that leads to a sibling is refused; one that stays inside is followed', async () => {
  await refused('to-evil/secret.json', /leads through a symbolic link outside/);
  await refused('to-evil', /leads through a symbolic link outside/);
  await refused('to-evil/not-yet/created', /leads through a symbolic link outside/, { write: true });
  assert.equal(await rule.resolve('to-sub/ok.json', 'f'), join(ws, 'sub', 'ok.json'));
});

test('the store folder is never written, itself included; reading it is allowed', async () => {
  await refused(STORE_DIR_NAME, /which only the server writes/, { write: true });
  await refused(join(STORE_DIR_NAME, 'runs', 'x'), /which only the server writes/, { write: true });
  assert.equal(await rule.resolve(STORE_DIR_NAME, 'f'), join(ws, STORE_DIR_NAME));
  // A sibling of the store folder whose name extends it is an ordinary folder.
  assert.equal(await rule.resolve(`${STORE_DIR_NAME}-export`, 'f', { write: true }), join(ws, `${STORE_DIR_NAME}-export`));
});

test('the store folder in any letter case, or with the trailing dots and spaces Windows drops, is never written', async () => {
  for (const name of ['.TROUPE', '.Troupe', '.troupe.', '.troupe ', '.TROUPE. ']) {
    await refused(join(name, 'runs', 'x'), /which only the server writes/, { write: true });
  }
});

test('Windows path forms are refused by field, never made into a folder of that name: drive letters, UNC, backslashes', async () => {
  for (const path of ['C:\\Windows\\win.ini', 'c:/Windows', 'C:relative', 'D:', '\\\\server\\share\\x', '\\Windows', 'exports\\run-1', '..\\..\\outside']) {
    await refused(path, process.platform === 'win32' ? /drive letter|outside/ : /drive letter|backslash/, { write: true });
  }
});
