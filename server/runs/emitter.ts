/**
 * A typed event with subscribe/dispose, the shape VS Code's `Event<T>` has. A listener that throws
 * is reported and the others still run: one broken subscriber must not stop a run's events.
 */
export interface Disposable {
  dispose(): void;
}

export class Emitter<T> {
  private readonly listeners = new Set<(e: T) => void>();

  constructor(private readonly onListenerError: (error: unknown) => void) {}

  /** Subscribes; `dispose()` unsubscribes. */
  readonly event = (listener: (e: T) => void): Disposable => {
    // Wrapped so the same function can subscribe twice and be disposed once per subscription.
    const entry = (e: T) => listener(e);
    this.listeners.add(entry);
    return { dispose: () => this.listeners.delete(entry) };
  };

  fire(e: T): void {
    for (const l of [...this.listeners]) {
      try {
        l(e);
      } catch (error) {
        this.onListenerError(error);
      }
    }
  }

  clear(): void {
    this.listeners.clear();
  }
}
