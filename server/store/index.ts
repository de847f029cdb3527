/**
 * The run store's public surface. Everything else in server/ imports from here; nothing outside
 * store/ imports better-sqlite3.
 */
export { openRunStore, RunStore, type RunStoreOptions, type StoreSettings } from './run-store.ts';
export { RunStoreError, type RunStoreErrorCode } from './store-error.ts';
export { defaultDatabasePath, defaultRunDir, DATABASE_FILE_NAME, STORE_DIR_NAME } from './store-paths.ts';
export { stepInputSchema, type StepData, type StepInput } from './step-input.ts';
export { newRunSchema, type NewRun } from './run-records.ts';
export type { CommitResult, RewindResult } from './step-writer.ts';
export { SCHEMA_VERSION } from './schema-migrations.ts';
