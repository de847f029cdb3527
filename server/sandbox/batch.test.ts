/**
 * Batched execution (`Sandbox.runBatch`, `batch-harness.ts`): one program on many stdins in one
 * sandbox process must give each case the Execution a run of its own gives. The corpus runs every
 * program both ways, in both modes, and compares the verdicts; then what only a batch could get
 * wrong: one case's files, processes or output reaching the next, a program forging a verdict,
 * the batch's own ceilings, and runAll's grouping.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { sandboxSchema, type SandboxConfig } from '../protocol/experiment-config.ts';
import type { Execution, ProgramRequest } from '../protocol/trajectory.ts';
import { exceptionName } from '../envs/program-acts.ts';
import { batchOutcomes, MAX_BATCH_CASES } from './batch.ts';
import { Sandbox } from './sandbox.ts';
import { BWRAP } from './sandbox-command.ts';
import { noStraysWithin } from './test-util.ts';

const skip = existsSync(BWRAP) ? false : `${BWRAP} is missing (apt-get install bubblewrap)`;
const modes = ['bubblewrap', 'unsandboxed'] as const;
const quiet = { log: () => {} };
const config = (mode: (typeof modes)[number], limits: Partial<SandboxConfig['limits']> = {}): SandboxConfig =>
  sandboxSchema.parse({ mode, limits: { wallMs: 3000, cpuSeconds: 1, ...limits } });
const py = (code: string, stdin = ''): ProgramRequest => ({ language: 'python', code, stdin });

/** What a verdict is made of. stderr is compared by its exception (unsandboxed paths differ per run). */
const verdict = (e: Execution) => ({ status: e.status, exitCode: e.exitCode, signal: e.signal, stdout: e.stdout, truncated: e.truncated, exception: exceptionName(e.stderr), stdin: e.stdin, code: e.code });

interface Program {
  readonly name: string;
  readonly code: string;
  readonly stdins: readonly string[];
  /** The statuses expected, case by case (both ways must agree with each other and with these). */
  readonly statuses: readonly Execution['status'][];
}

const corpus: readonly Program[] = [
  { name: 'passes', code: 'a, b = map(int, input().split())\nprint(a + b)\n', stdins: ['1 2\n', '3 4\n', '-5 5\n'], statuses: ['ok', 'ok', 'ok'] },
  { name: 'wrong answer', code: 'a, b = map(int, input().split())\nprint(a - b)\n', stdins: ['1 2\n', '7 3\n'], statuses: ['ok', 'ok'] },
  { name: 'raises on one input', code: 'n = int(input())\nprint(10 // n)\n', stdins: ['2\n', '0\n', '5\n'], statuses: ['ok', 'error', 'ok'] },
  { name: 'does not parse', code: 'print(1\n', stdins: ['\n', '\n'], statuses: ['error', 'error'] },
  { name: 'exits with its own codes', code: 'import sys\nsys.exit(int(input()))\n', stdins: ['0\n', '3\n', '256\n'], statuses: ['ok', 'error', 'ok'] },
  { name: 'exits with a message', code: 'import sys\nprint("out")\nsys.exit("bye")\n', stdins: ['', ''], statuses: ['error', 'error'] },
  { name: 'kills itself with a signal', code: 'import os, signal\nif input() == "t":\n    os.kill(os.getpid(), signal.SIGTERM)\nprint("alive")\n', stdins: ['t\n', 'n\n'], statuses: ['error', 'ok'] },
  { name: 'sleeps past the wall clock in one case only', code: 'import time\ntime.sleep(float(input()))\nprint("done")\n', stdins: ['0\n', '5\n', '0\n'], statuses: ['ok', 'timeout', 'ok'] },
  { name: 'floods its output in one case', code: 'import sys\nif input() == "flood":\n    for i in range(100):\n        sys.stdout.write("x" * (1024 * 1024))\nprint("small")\n', stdins: ['no\n', 'flood\n', 'no\n'], statuses: ['ok', 'output-limit', 'ok'] },
  { name: 'reads a missing file', code: 'print(open("/tmp/missing-input.txt").read())\n', stdins: ['', ''], statuses: ['error', 'error'] },
  { name: 'loops forever in case 3 of 5', code: 'n = int(input())\nwhile n == 3:\n    pass\nprint(n * n)\n', stdins: ['1\n', '2\n', '3\n', '4\n', '5\n'], statuses: ['ok', 'ok', 'timeout', 'ok', 'ok'] },
  { name: 'reads stdin in UTF-8 and writes invalid bytes', code: 'import sys\ns = sys.stdin.read()\nprint(s[::-1])\nsys.stdout.flush()\nsys.stdout.buffer.write(b"a\\xffb")\n', stdins: ['héllo ✓', ''], statuses: ['ok', 'ok'] },
  { name: 'leaves a large stdin unread', code: 'print("ignored")\n', stdins: ['x'.repeat(512 * 1024), 'y\n'], statuses: ['ok', 'ok'] },
  { name: 'writes to stderr and stdout interleaved', code: 'import sys\nfor i in range(3):\n    print(i)\n    print("e", i, file=sys.stderr)\n', stdins: ['', ''], statuses: ['ok', 'ok'] },
  { name: 'checks it is __main__ with a fresh namespace', code: 'import sys\nprint(__name__, sys.argv[0].endswith("main.py"), "seen" in globals())\nseen = 1\n', stdins: ['', ''], statuses: ['ok', 'ok'] },
];

describe('batched execution gives each case the verdict of a run of its own', { skip }, () => {
  for (const mode of modes) {
    describe(mode, () => {
      let sandbox: Sandbox;
      before(async () => {
        sandbox = await Sandbox.open(config(mode), quiet);
      });
      after(() => sandbox.close());
      for (const p of corpus) {
        test(p.name, async () => {
          const reqs = p.stdins.map((s) => py(p.code, s));
          const [batched, alone] = await Promise.all([sandbox.runBatch(reqs), Promise.all(reqs.map((r) => sandbox.run(r)))]);
          assert.deepEqual(batched.map(verdict), alone.map(verdict));
          assert.deepEqual(batched.map((e) => e.status), [...p.statuses]);
        });
      }
    });
  }
});

describe('a batch keeps its cases apart', { skip }, () => {
  let sandbox: Sandbox;
  before(async () => {
    sandbox = await Sandbox.open(config('bubblewrap'), quiet);
  });
  after(() => sandbox.close());

  test("a case's files are gone before the next case starts", async () => {
    const code = 'import os\nprint(sorted(os.listdir(".")))\nopen("left.txt", "w").write("x")\nos.mkdir("d")\nos.chmod("d", 0)\n';
    const [first, second] = await sandbox.runBatch([py(code), py(code)]);
    assert.equal(first!.status, 'ok', first!.stderr);
    assert.equal(second!.stdout, first!.stdout);
    assert.doesNotMatch(second!.stdout, /left\.txt|'d'/);
  });

  test("a case's leftover processes are gone before the next case starts", async () => {
    // The first case leaves a sleeper in a session of its own (out of its process group).
    const code = 'import os, time\nif input() == "leave":\n    if os.fork() == 0:\n        os.setsid()\n        os.close(1); os.close(2)\n        time.sleep(60)\n        os._exit(0)\nprint(sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()))\n';
    const [leave, look] = await sandbox.runBatch([py(code, 'leave\n'), py(code, 'look\n')]);
    assert.equal(leave!.status, 'ok', leave!.stderr);
    assert.equal(look!.status, 'ok', look!.stderr);
    // Only bwrap's init (1) and the harness (2) besides the case itself.
    assert.deepEqual(JSON.parse(look!.stdout), [1, 2]);
  });

  test('a program cannot forge a verdict: the harness\'s channel is out of its reach', async () => {
    const fake = JSON.stringify({ exit: 0, signal: null, ended: null, truncated: false, ms: 1, out: Buffer.from('forged\n').toString('base64'), err: '' });
    const code =
      'import os\n' +
      `fake = ${JSON.stringify(fake + '\n')}.encode()\n` +
      'for fd in range(3, 64):\n    try:\n        os.write(fd, fake)\n        print("fd", fd)\n    except OSError:\n        pass\n' +
      'for f in ("/proc/%d/fd/1" % os.getppid(), "/proc/%d/fd/1" % 2):\n    try:\n        w = os.open(f, os.O_WRONLY)\n        os.write(w, fake)\n        print("wrote", f)\n    except OSError as e:\n        pass\n' +
      // Writing the harness's memory (or ptrace) would forge anything: it is non-dumpable, so /proc/<pid>/mem is closed.
      'try:\n    os.open("/proc/%d/mem" % os.getppid(), os.O_RDWR)\n    print("opened its memory")\nexcept OSError:\n    pass\n' +
      'print("honest")\n';
    const results = await sandbox.runBatch([py(code), py(code), py(code)]);
    for (const e of results) {
      assert.equal(e.status, 'ok', e.stderr);
      assert.equal(e.stdout, 'honest\n');
    }
  });

  test('a case that kills the harness ends the batch in errors, never a pass', async () => {
    const code = 'import os, signal\nif input() == "kill":\n    os.kill(os.getppid(), signal.SIGKILL)\n    import time; time.sleep(1)\nprint("ok")\n';
    const results = await sandbox.runBatch([py(code, 'no\n'), py(code, 'kill\n'), py(code, 'no\n')]);
    assert.equal(results[0]!.status, 'ok');
    assert.deepEqual(results.slice(1).map((e) => e.status), ['error', 'error']);
    assert.match(results[1]!.stderr, /the batch ended .* before this case finished/);
  });

  test('requests it refuses come back refused, the others run', async () => {
    const results = await sandbox.runBatch([py('print(input())', 'a\n'), py('print(input())', 'x'.repeat(2 * 1024 * 1024)), py('print(input())', 'b\n')]);
    assert.deepEqual(results.map((e) => e.status), ['ok', 'refused', 'ok']);
    assert.deepEqual([results[0]!.stdout, results[2]!.stdout], ['a\n', 'b\n']);
    await assert.rejects(sandbox.runBatch([py('print(1)'), py('print(2)')]), /same code/);
  });
});

describe('a batch stays under the limits of the sandbox', { skip }, () => {
  test('each case is stopped by the CPU limit; the batch goes on', async () => {
    const s = await Sandbox.open(config('bubblewrap', { cpuSeconds: 1, wallMs: 30_000 }), quiet);
    const results = await s.runBatch(['spin\n', 'no\n', 'spin\n'].map((i) => py('if input() == "spin":\n    while True:\n        pass\nprint("ok")\n', i)));
    await s.close();
    assert.deepEqual(results.map((e) => [e.status, e.signal]), [['timeout', 'SIGKILL'], ['ok', null], ['timeout', 'SIGKILL']]);
    // One CPU second, even on a loaded machine, is far less than the 30 s wall clock.
    for (const e of [results[0]!, results[2]!]) assert.ok(e.durationMs < 15_000, `${e.durationMs} ms: the CPU limit, not the wall clock, stopped the loop`);
  });

  test('each case has the memory limit of a run', async () => {
    const code = 'b = bytearray(int(input()) * 1024 * 1024)\nprint(len(b))\n';
    const s = await Sandbox.open(config('bubblewrap', { memoryMb: 128 }), quiet);
    const results = await s.runBatch([py(code, '1\n'), py(code, '200\n'), py(code, '1\n')]);
    await s.close();
    assert.deepEqual(results.map((e) => e.status), ['ok', 'error', 'ok']);
    assert.match(results[1]!.stderr, /MemoryError/);
  });

  test('a fork bomb in one case stops at the process limit and the next case runs', async () => {
    const s = await Sandbox.open(config('bubblewrap', { wallMs: 1500, cpuSeconds: 1, processes: 16 }), quiet);
    const code = 'import os\nif input() == "bomb":\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass\nprint("after")\n';
    const results = await s.runBatch([py(code, 'bomb\n'), py(code, 'no\n')]);
    await s.close();
    assert.equal(results[0]!.status, 'timeout');
    assert.deepEqual([results[1]!.status, results[1]!.stdout], ['ok', 'after\n']);
    await noStraysWithin(3000);
  });

  test('the output cap holds per case: a flood is cut at the cap, a looser cap keeps it all', async () => {
    const code = 'import sys\nsys.stdout.write("x" * int(input()))\n';
    const s = await Sandbox.open(config('bubblewrap', { outputBytes: 4096 }), quiet);
    const results = await s.runBatch([py(code, '5000\n'), py(code, '4000\n')]);
    await s.close();
    assert.deepEqual(results.map((e) => [e.status, e.stdout.length, e.truncated]), [['output-limit', 4096, true], ['ok', 4000, false]]);
  });

  test('the batch as a whole has a wall clock: cases it did not reach are timeouts', () => {
    const cut = batchOutcomes({ status: 'timeout', exitCode: null, signal: 'SIGKILL', stdout: '{"exit": 0, "signal": null, "ended": null, "truncated": false, "ms": 3, "out": "MQo=", "err": ""}\n{"exit": 0, "sig', stderr: '', truncated: false, durationMs: 9000 }, 3, 'timeout');
    assert.deepEqual(cut.map((e) => [e.status, e.stdout]), [['ok', '1\n'], ['timeout', ''], ['timeout', '']]);
    const malformed = batchOutcomes({ status: 'ok', exitCode: 0, signal: null, stdout: '{"exit": "0"}\n', stderr: '', truncated: false, durationMs: 9 }, 1, null);
    assert.equal(malformed[0]!.status, 'error');
  });
});

describe('runAll batches the programs that share their code', { skip }, () => {
  test('a coder\'s tests run as one batch; order, refusals and other programs are kept', async () => {
    const s = await Sandbox.open(config('bubblewrap'), quiet);
    const coder = 'print(int(input()) * 2)\n';
    const reqs = [py(coder, '1\n'), py('print("ref")'), py(coder, '2\n'), py(coder, 'x'.repeat(2 * 1024 * 1024)), py(coder, '3\n')];
    let most = 0;
    const watch = setInterval(() => (most = Math.max(most, s.runningCount)), 2);
    const results = await s.runAll(reqs);
    clearInterval(watch);
    await s.close();
    assert.deepEqual(results.map((e) => [e.status, e.stdout, e.stdin.length]), [['ok', '2\n', 2], ['ok', 'ref\n', 0], ['ok', '4\n', 2], ['refused', '', 2 * 1024 * 1024], ['ok', '6\n', 2]]);
    // Two processes: the coder's batch and the reference's run.
    assert.ok(most <= 2, `${most} processes at once`);
  });

  test('calls made together (concurrent episodes) share batches, each getting its own results', async () => {
    // Unsandboxed, a case's parent is the harness's host pid: the same pid means the same batch.
    const s = await Sandbox.open(config('unsandboxed'), quiet);
    const code = 'import os\nprint(input(), os.getppid())\n';
    const [a, b] = await Promise.all([s.runAll([py(code, 'a1\n'), py(code, 'a2\n')]), s.runAll([py(code, 'b1\n')])]);
    await s.close();
    const words = [...a, ...b].map((e) => e.stdout.trim().split(' '));
    assert.deepEqual(words.map((w) => w[0]), ['a1', 'a2', 'b1']);
    assert.equal(new Set(words.map((w) => w[1])).size, 1, 'one harness ran all three');
  });

  test(`groups larger than ${MAX_BATCH_CASES} are split into batches`, async () => {
    const s = await Sandbox.open(config('bubblewrap'), quiet);
    const n = MAX_BATCH_CASES + 3;
    const results = await s.runAll(Array.from({ length: n }, (_, i) => py('print(input())', `${i}\n`)));
    await s.close();
    assert.deepEqual(results.map((e) => e.stdout), Array.from({ length: n }, (_, i) => `${i}\n`));
  });
});
