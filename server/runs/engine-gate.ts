/**
 * An engine that can be cut off between two calls, to abandon a run's step in flight without
 * waiting for the step boundary (a server shutting down past its timeout).
 *
 * Why not `worker.terminate()` on the run worker: its engine worker would be torn down with it,
 * and a thread torn down while inside an ONNX Runtime call makes onnxruntime-node throw a C++
 * exception that aborts the whole process ("terminate called after throwing an instance of
 * 'Napi::Error'"). Tearing down an engine worker that is idle is safe: `Engine.close()` does that
 * at the end of every run. So the gate stops new calls (they never settle, which leaves the
 * trainer suspended where it was), waits for the calls already in flight, and only then lets the
 * caller close the engine.
 */
import type { Engine } from '../runtime/engine.ts';

export interface EngineGate {
  /** The engine to hand to the trainer. */
  readonly engine: Engine;
  /** Refuses new calls (they never settle) and resolves once no call is in flight. */
  drain(): Promise<void>;
}

export function gateEngine(target: Engine): EngineGate {
  let closed = false;
  let inFlight = 0;
  let idle: (() => void) | null = null;
  const settle = () => {
    inFlight--;
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
        if (closed) return new Promise<never>(() => {});
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
      return inFlight === 0 ? Promise.resolve() : new Promise<void>((r) => (idle = r));
    },
  };
}
