/**
 * A run manager shut down past its timeout while its run is inside an engine call, in a process of
 * its own (run-shutdown.ort.test.ts): a thread torn down inside an ONNX Runtime call aborts the
 * whole process, which a test must survive to report it. Starts a run of `config` (a JSON file),
 * waits for its first committed step, closes with a zero timeout and an exit grace of `graceMs`,
 * and prints one JSON line: the run's id, its final state, its last committed step, and the
 * manager's log.
 * Usage: node --import tsx test/server/shutdown-child.ts <workspace> <config.json> <graceMs>
 */
import { readFileSync } from 'node:fs';
import { RunManager } from '../../server/runs/run-manager.ts';

const [workspace, configFile, grace] = process.argv.slice(2);
if (!workspace || !configFile || !grace) throw new Error('usage: shutdown-child.ts <workspace> <config.json> <graceMs>');
const log: string[] = [];
const m = await RunManager.open({ workspace, closeTimeoutMs: 0, exitGraceMs: Number(grace), log: (l) => log.push(l) });
const run = await m.start({ config: JSON.parse(readFileSync(configFile, 'utf8')) as unknown });
await new Promise<void>((resolve) => m.onDidProgress((p) => p.runId === run.id && p.step >= 0 && resolve()));
await m.close();
// The closed manager's store is closed too: read the outcome through a fresh one.
const reopened = await RunManager.open({ workspace, log: () => {} });
const final = reopened.store.getRun(run.id)!;
await reopened.close();
process.stdout.write(`${JSON.stringify({ runId: run.id, runDir: final.runDir, state: final.state, lastCommittedStep: final.lastCommittedStep, log })}\n`);
