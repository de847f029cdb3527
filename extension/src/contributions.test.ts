/**
 * The manifest (extension/package.json) and the code agree: every command the code registers for
 * the palette is declared with the "Troupe" category, menus name only declared commands, settings
 * and views exist under the ids the code reads, the JSON Schema patterns are the config patterns,
 * and `main` is the file extension/esbuild.mjs writes.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { z } from 'zod';
import { jsonValidationFileMatch } from './config-files.ts';
import { commandIds, configSchemaScheme, configSchemaUrl, connectionContextKey, runsViewId, settingKeys, settingsSection, viewContainerId } from './contributions.ts';

const manifestSchema = z.object({
  name: z.literal('troupe'),
  publisher: z.literal('troupe'),
  type: z.literal('module'),
  main: z.string(),
  engines: z.object({ vscode: z.string() }),
  activationEvents: z.array(z.string()),
  capabilities: z.object({
    untrustedWorkspaces: z.object({ supported: z.literal('limited'), description: z.string(), restrictedConfigurations: z.array(z.string()) }),
  }),
  contributes: z.object({
    commands: z.array(z.object({ command: z.string(), title: z.string(), category: z.string() })),
    viewsContainers: z.object({ activitybar: z.array(z.object({ id: z.string(), icon: z.string() })) }),
    views: z.record(z.string(), z.array(z.object({ id: z.string() }))),
    viewsWelcome: z.array(z.object({ view: z.string(), contents: z.string(), when: z.string() })),
    menus: z.record(z.string(), z.array(z.object({ command: z.string(), when: z.string().optional() }))),
    configuration: z.object({ properties: z.record(z.string(), z.object({ markdownDescription: z.string() })) }),
    jsonValidation: z.array(z.object({ fileMatch: z.array(z.string()), url: z.string() })),
  }),
});
const manifest = manifestSchema.parse(JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')));
const declared = new Set(manifest.contributes.commands.map((c) => c.command));

test('every palette command is declared once, in the Troupe category', () => {
  assert.deepEqual([...declared].sort(), Object.values(commandIds).sort());
  assert.equal(manifest.contributes.commands.length, declared.size, 'a command is declared twice');
  for (const c of manifest.contributes.commands) assert.equal(c.category, 'Troupe', c.command);
});

test('menus and welcome links name declared commands', () => {
  for (const [menu, items] of Object.entries(manifest.contributes.menus)) {
    for (const item of items) assert.ok(declared.has(item.command), `${menu} names ${item.command}`);
  }
  for (const w of manifest.contributes.viewsWelcome) {
    for (const [, id] of w.contents.matchAll(/\(command:([\w.]+)\)/g)) {
      assert.ok(declared.has(id!) || id!.startsWith('workbench.'), `welcome content links ${id}`);
    }
  }
});

test('the view lives in the Troupe activity bar container', () => {
  assert.deepEqual(manifest.contributes.viewsContainers.activitybar.map((c) => c.id), [viewContainerId]);
  assert.deepEqual(manifest.contributes.views[viewContainerId]?.map((v) => v.id), [runsViewId]);
  for (const w of manifest.contributes.viewsWelcome) assert.equal(w.view, runsViewId);
});

test('welcome content covers the empty run list and a connection in progress', () => {
  // Not running is shown by the tree itself (RunsTree), since the reason varies.
  const when = manifest.contributes.viewsWelcome.map((w) => w.when);
  assert.ok(when.includes(`${connectionContextKey} == connected`));
  assert.ok(when.some((w) => w.includes(`${connectionContextKey} != notRunning`)));
});

test('settings exist and are restricted in untrusted workspaces', () => {
  const properties = Object.keys(manifest.contributes.configuration.properties).sort();
  const expected = Object.values(settingKeys).map((k) => `${settingsSection}.${k}`).sort();
  assert.deepEqual(properties, expected);
  // Each could run a program or send a local file to an address a workspace chose.
  assert.deepEqual([...manifest.capabilities.untrustedWorkspaces.restrictedConfigurations].sort(), expected);
});

test('JSON Schema validation uses the config patterns and the schema the extension serves (activated by it)', () => {
  const [validation] = manifest.contributes.jsonValidation;
  assert.deepEqual(validation?.fileMatch, [...jsonValidationFileMatch]);
  assert.equal(validation?.url, configSchemaUrl);
  // VS Code's JSON language features may ask for the schema before anything else activates Troupe.
  assert.ok(manifest.activationEvents.includes(`onFileSystem:${configSchemaScheme}`));
});

test('main is the CommonJS bundle extension/esbuild.mjs writes, and VS Code 1.100 is the floor', () => {
  // With "type": "module", VS Code loads a `.js` main as an ES module; the bundle is CommonJS.
  assert.equal(manifest.main, './dist/extension.cjs');
  assert.match(readFileSync(new URL('../esbuild.mjs', import.meta.url), 'utf8'), /'dist', 'extension\.cjs'/);
  assert.equal(manifest.engines.vscode, '^1.100.0');
});

test('the walkthrough: every command it links is declared, every media file ships, every step says when it is done or is read', () => {
  const walkthroughs = z
    .object({
      contributes: z.object({
        walkthroughs: z.array(
          z.object({
            id: z.string(),
            title: z.string(),
            steps: z.array(z.object({ id: z.string(), title: z.string(), description: z.string(), media: z.object({ markdown: z.string() }), completionEvents: z.array(z.string()).optional() })).min(4),
          }),
        ),
      }),
    })
    .parse(JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'))).contributes.walkthroughs;
  assert.equal(walkthroughs.length, 1);
  const ignore = readFileSync(new URL('../.vscodeignore', import.meta.url), 'utf8');
  assert.match(ignore, /^!media\/\*\*$/m, 'media/ ships in the .vsix');
  for (const step of walkthroughs[0]!.steps) {
    for (const [, id] of step.description.matchAll(/\(command:(troupe\.[\w.]+)/g)) assert.ok(declared.has(id!), `step ${step.id} links ${id}, which is not declared`);
    assert.ok(existsSync(new URL(`../${step.media.markdown}`, import.meta.url)), `step ${step.id}: ${step.media.markdown} is missing`);
    for (const event of step.completionEvents ?? []) {
      const command = /^onCommand:(.+)$/.exec(event)?.[1];
      if (command !== undefined) assert.ok(declared.has(command), `step ${step.id} completes on ${command}, which is not declared`);
    }
  }
});
