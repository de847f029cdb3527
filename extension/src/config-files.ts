/**
 * Which files are Troupe experiment configs: JSON files under a `configs/` folder (the layout of
 * the Troupe repository and of `troupe init`-style workspaces) and files named `*.troupe.json`
 * anywhere. `configs/schema.json` is the generated JSON Schema those configs point at, not a
 * config, and folders that hold other people's files (node_modules) or Troupe's own state
 * (.troupe) are never searched.
 *
 * The same patterns appear in the manifest (jsonValidation, activation events); the manifest test
 * checks they agree.
 */

/** Glob patterns of config files, as VS Code globs (for findFiles and document selectors). */
export const configFileGlobs = ['**/configs/**/*.json', '**/*.troupe.json'] as const;

/** `findFiles` include pattern covering every config glob. */
export const configFileInclude = `{${configFileGlobs.join(',')}}`;

/** `findFiles` exclude pattern: dependency and state folders. */
export const configFileExclude = '{**/node_modules/**,**/.troupe/**}';

/** The jsonValidation `fileMatch` list the manifest declares (exclusions start with `!`). */
export const jsonValidationFileMatch = [...configFileGlobs, '!**/configs/schema.json', '!**/node_modules/**'] as const;

/** File name of the generated schema that sits beside the configs. */
const SCHEMA_FILE = 'schema.json';

/**
 * Whether a path (file system path or URI path, either separator) names an experiment config.
 * The language client's middleware and the Start Training picker both use this, so a file is a
 * config in one place exactly when it is in the other.
 */
export function isExperimentConfigPath(path: string): boolean {
  const p = path.replaceAll('\\', '/');
  if (!p.toLowerCase().endsWith('.json')) return false;
  const segments = p.split('/');
  if (segments.some((s) => s === 'node_modules' || s === '.troupe')) return false;
  const name = segments.at(-1) ?? '';
  if (name.endsWith('.troupe.json')) return true;
  // A config lives somewhere below a folder named `configs`; the schema beside them is not one.
  const underConfigs = segments.slice(0, -1).includes('configs');
  return underConfigs && name !== SCHEMA_FILE;
}

/**
 * Orders config paths for a picker: the active editor's file first (the likely choice), then by
 * path. Paths are compared as given, so pass them relative to the workspace for a stable order.
 */
export function sortConfigPaths(paths: readonly string[], active: string | undefined): string[] {
  return [...paths].sort((a, b) => {
    if (a === active) return -1;
    if (b === active) return 1;
    return a.localeCompare(b);
  });
}
