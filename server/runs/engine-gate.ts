/**
 * An engine that can be cut off between two calls, to abandon a run's step in flight without
 * waiting for the step boundary (a server shutting down past its timeout), and the count of its
 * calls in flight that the run manager reads to know when tearing the worker down is safe.
 *
 * Why not `worker.terminate()` on the run worker whenever: its engine worker would be torn down
 * with it, and a thread torn down while inside an ONNX Runtime call makes onnxruntime-node throw a
 * C++ exception that aborts the whole process ("terminate called after throwing an instance of
 * 'Napi::Error'"). Tearing down an engine worker that is idle is safe: `Engine.close()` does that
 * at the end of every run. So the gate stops new calls (they never settle, which leaves the
 * trainer suspended where it was), waits for the calls already in flight, and only then lets the
 * caller close the engine.
 *
 * The run worker's own JavaScript may be wedged when the manager gives up on it, so the count
 * lives in shared memory (`EngineCalls`), readable without the worker's help, and the manager
 * terminates a worker only through `tryTerminate`, which succeeds only while nothing is in flight
 * and, atomically, keeps anything from starting after.
 */
import type { Engine } from '../runtime/engine.ts';

/** Int32 cells of the shared buffer. */
const IN_FLIGHT = 0;
const STATE = 1;
/** STATE values: calls allowed; closed (gated calls refused, engine start and close still allowed); being terminated (nothing allowed). */
const OPEN = 0;
const CLOSED = 1;
const TERMINATING = 2;

/**
 * The engine calls of one run worker in flight (gated calls, the engine's start and its close),
 * counted in a SharedArrayBuffer the run manager and the worker both see. The protocol is Dekker's:
 * a caller increments the count and then reads the state; `tryTerminate` writes the state and then
 * reads the count. Atomics are sequentially consistent, so at least one of the two sees the other:
 * either the manager sees the call and does not terminate, or the caller sees TERMINATING and does
 * not start it.
 */
export class EngineCalls {
  private readonly cells: Int32Array;

  constructor(readonly buffer: SharedArrayBuffer) {
    if (buffer.byteLength < 8) throw new RangeError(`EngineCalls needs an 8-byte SharedArrayBuffer, got ${buffer.byteLength} bytes`);
    this.cells = new Int32Array(buffer, 0, 2);
  }

  static create(): EngineCalls {
    return new EngineCalls(new SharedArrayBuffer(8));
  }

  get inFlight(): number {
    return Atomics.load(this.cells, IN_FLIGHT);
  }

  /**
   * Enters a call. A gated call is refused once the gate is closed; the engine's start and close
   * ('essential') are refused only while the manager is terminating the thread, and wait out its
   * check otherwise (it backs off when it sees them, and wakes them).
   */
  enter(kind: 'gated' | 'essential'): boolean {
    for (;;) {
      Atomics.add(this.cells, IN_FLIGHT, 1);
      const state = Atomics.load(this.cells, STATE);
      if (state === OPEN || (state === CLOSED && kind === 'essential')) return true;
      Atomics.sub(this.cells, IN_FLIGHT, 1);
      if (kind === 'gated') return false;
      // TERMINATING: either the thread is about to end, or the manager saw a call and backs off.
      Atomics.wait(this.cells, STATE, TERMINATING, 50);
    }
  }

  leave(): void {
    Atomics.sub(this.cells, IN_FLIGHT, 1);
  }

  /** Runs `body` as an essential call (engine start, engine close). */
  async essential<T>(body: () => Promise<T>): Promise<T> {
    this.enter('essential');
    try {
      return await body();
    } finally {
      this.leave();
    }
  }

  /** Refuses gated calls from now on (they never settle). */
  close(): void {
    Atomics.compareExchange(this.cells, STATE, OPEN, CLOSED);
  }

  /**
   * The run manager's last resort: true when no call is in flight, after which none can start, so
   * terminating the thread cannot catch ONNX Runtime inside a call; false (and calls resume) when
   * one is in flight.
   */
  tryTerminate(): boolean {
    this.close();
    Atomics.store(this.cells, STATE, TERMINATING);
    if (Atomics.load(this.cells, IN_FLIGHT) === 0) return true;
    Atomics.store(this.cells, STATE, CLOSED);
    Atomics.notify(this.cells, STATE);
    return false;
  }
}

export interface EngineGate {
  /** The engine to hand to the trainer. */
  readonly engine: Engine;
  /** Refuses new calls (they never settle) and resolves once no call is in flight. */
  drain(): Promise<void>;
}

export function gateEngine(target: Engine, calls: EngineCalls): EngineGate {
  let closed = false;
  let inFlight = 0;
  let idle: (() => void) | null = null;
  const settle = () => {
    inFlight--;
    calls.leave();
    if (closed && inFlight === 0) idle?.();
  };
  const engine = new Proxy(target, {
    get(t, prop) {
      const value: unknown = Reflect.get(t, prop, t);
      if (typeof value !== 'function') return value;
      const method = value as (...args: unknown[]) => unknown;
      // close() stays the caller's: it runs once the gate has drained.
      if (prop === 'close') return method.bind(t);
      return (...args: unknown[]) => {
        // Closed here (abort) or by the manager (giving up on this worker): the call never starts.
        if (closed || !calls.enter('gated')) return new Promise<never>(() => {});
        inFlight++;
        let result: unknown;
        try {
          result = method.apply(t, args);
        } catch (e) {
          settle();
          throw e;
        }
        return Promise.resolve(result).finally(settle);
      };
    },
  });
  return {
    engine,
    drain: () => {
      closed = true;
      calls.close();
      return inFlight === 0 ? Promise.resolve() : new Promise<void>((r) => (idle = r));
    },
  };
}
