/**
 * What every `troupe` subcommand is, and the argument handling they share. A command line that
 * cannot be understood (unknown flag, missing or extra argument, a flag value of the wrong form) is
 * a `UsageError`: main prints the message and the command's usage and exits with 2; anything else
 * that goes wrong is an ordinary error (one line, exit 1).
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

export interface Command {
  /** Command-line forms for `troupe --help`, without the leading `troupe`. */
  readonly synopsis: readonly string[];
  /** What it does, in one line. */
  readonly summary: string;
  /** Full usage text, printed by `troupe <command> --help` and after a usage error. */
  readonly usage: string;
  /** Runs the command; resolves with the process exit code. */
  run(args: readonly string[]): Promise<number>;
}

/** A command line that does not fit the command's usage. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
  constructor(
    message: string,
    /** The usage text to print after the message. */
    readonly usage: string,
  ) {
    super(message);
  }
}

/**
 * `parseArgs` in strict mode with positionals allowed, its errors (unknown option, missing value)
 * turned into usage errors.
 */
export function parseCommandLine<T extends ParseArgsConfig>(usage: string, config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs<T>(config);
  } catch (e) {
    if (e instanceof Error && 'code' in e && typeof e.code === 'string' && e.code.startsWith('ERR_PARSE_ARGS_')) throw new UsageError(e.message, usage);
    throw e;
  }
}

/** Checks the number of positional arguments; `names` are their placeholders in the usage. */
export function expectPositionals(positionals: readonly string[], names: readonly string[], usage: string): void {
  if (positionals.length < names.length) throw new UsageError(`missing ${names.slice(positionals.length).join(' ')}`, usage);
  if (positionals.length > names.length) throw new UsageError(`unexpected argument '${positionals[names.length]}'`, usage);
}

/** The integer value of `--name`, at least `min`. */
export function integerFlag(name: string, value: string, min: number, usage: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isSafeInteger(n) || n < min) {
    throw new UsageError(`--${name} must be an integer${min === 0 ? ' >= 0' : min === 1 ? ' >= 1' : ` >= ${min}`}, got '${value}'`, usage);
  }
  return n;
}

/** A number flag's value in [min, max], or a UsageError naming the flag. */
export function numberFlag(name: string, value: string, min: number, max: number, usage: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < min || n > max) {
    throw new UsageError(`--${name} must be a number from ${min} to ${max}, got '${value}'`, usage);
  }
  return n;
}

/** Prints a command's usage to stdout (for `--help`) and returns exit code 0. */
export function printUsage(usage: string): number {
  process.stdout.write(usage);
  return 0;
}
