/**
 * Client of the PyTorch JSON-lines benchmark server (`torch_bench.py`): one persistent process,
 * one command at a time, so PyTorch and Troupe rounds can be interleaved on a quiet machine.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { benchPython } from './bench-util.ts';
import { torchBlas, type TorchBlas } from './torch-blas.ts';

/** The server's `info` reply (the fields the benches read). */
export interface TorchInfo {
  torch: string;
  blasLibrary: string[];
  /** OpenBLAS's kernel in the server process (openblas_get_corename), null without OpenBLAS. */
  blasCore: string | null;
  threads: number;
}

export class TorchServer {
  private readonly lines: AsyncIterator<string>;
  private constructor(private readonly proc: ChildProcessWithoutNullStreams) {
    this.lines = createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  }

  /** `env` is laid over this process's environment (undefined unsets): the OPENBLAS_CORETYPE `torchBlas` chose. */
  static start(threads: number, variant: 'fused' | 'plain' = 'fused', env: Record<string, string | undefined> = {}): TorchServer {
    const script = fileURLToPath(new URL('./torch_bench.py', import.meta.url));
    const proc = spawn(benchPython(), [script, '--threads', String(threads), '--variant', variant], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    proc.stderr.on('data', (d: Buffer) => process.stderr.write(`[torch] ${d.toString()}`));
    return new TorchServer(proc);
  }

  /**
   * Chooses the baseline's OpenBLAS kernel (`torchBlas`), starts the server pinned to it, and checks
   * that the server loaded that kernel: the way every CPU bench starts PyTorch.
   */
  static async startWithBestBlas(threads: number, log: (line: string) => void): Promise<{ server: TorchServer; blas: TorchBlas; info: TorchInfo }> {
    const blas = await torchBlas({ python: benchPython(), threads, log });
    const server = TorchServer.start(threads, 'fused', blas.choice.env);
    const info = await server.call<TorchInfo>({ cmd: 'info' });
    if (blas.choice.used !== null && info.blasCore?.toLowerCase() !== blas.choice.used.toLowerCase()) {
      await server.close();
      throw new Error(`the PyTorch server loaded OpenBLAS core ${info.blasCore ?? 'none'}, not ${blas.choice.used} (OPENBLAS_CORETYPE ignored?)`);
    }
    return { server, blas, info };
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
