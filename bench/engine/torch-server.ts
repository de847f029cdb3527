/**
 * Client of the PyTorch JSON-lines benchmark server (`torch_bench.py`): one persistent process,
 * one command at a time, so PyTorch and Troupe rounds can be interleaved on a quiet machine.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { benchPython } from './bench-util.ts';

export class TorchServer {
  private readonly lines: AsyncIterator<string>;
  private constructor(private readonly proc: ChildProcessWithoutNullStreams) {
    this.lines = createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  }

  static start(threads: number, variant: 'fused' | 'plain' = 'fused'): TorchServer {
    const script = fileURLToPath(new URL('./torch_bench.py', import.meta.url));
    const proc = spawn(benchPython(), [script, '--threads', String(threads), '--variant', variant], { stdio: ['pipe', 'pipe', 'pipe'] });
    proc.stderr.on('data', (d: Buffer) => process.stderr.write(`[torch] ${d.toString()}`));
    return new TorchServer(proc);
  }

  async call<T = Record<string, unknown>>(cmd: Record<string, unknown>): Promise<T> {
    this.proc.stdin.write(`${JSON.stringify(cmd)}\n`);
    const next = await this.lines.next();
    if (next.done) throw new Error(`torch server exited during '${String(cmd['cmd'])}' (is python3-torch installed? apt-get install python3-torch libopenblas0-openmp)`);
    const reply = JSON.parse(next.value) as T & { error?: string };
    if (reply.error) throw new Error(`torch ${String(cmd['cmd'])}: ${reply.error}`);
    return reply;
  }

  async close(): Promise<void> {
    try {
      await this.call({ cmd: 'quit' });
    } catch {
      // already gone
    }
    this.proc.kill();
  }
}
