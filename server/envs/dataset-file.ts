/**
 * What the dataset loaders (math, code) share about the file itself: errors that name the file,
 * where in it and what is wrong, and never quote its content (a dataset may hold anything); and
 * the check that runs before any byte is read, so a missing path, a folder or a file too large to
 * hold is refused up front.
 */
import { stat } from 'node:fs/promises';

/** An error about dataset file `path` of `kind` ('math', 'code'): the file, `where` in it ('' for the whole file), the problem. */
export function datasetFileError(kind: string, path: string, where: string, problem: string): Error {
  return new Error(`${kind} dataset ${path}${where ? `: ${where}` : ''}: ${problem}`);
}

/** Throws a named error unless `path` is a readable regular file of at most `maxBytes`. */
export async function checkDatasetFile(kind: string, path: string, maxBytes: number): Promise<void> {
  let info;
  try {
    info = await stat(path);
  } catch {
    throw datasetFileError(kind, path, '', 'cannot be read (missing or not accessible)');
  }
  if (!info.isFile()) throw datasetFileError(kind, path, '', 'is not a regular file');
  if (info.size > maxBytes) throw datasetFileError(kind, path, '', `is ${Math.ceil(info.size / 2 ** 20)} MB, over the ${maxBytes / 2 ** 20} MB limit`);
}
