/**
 * Every id the extension shares with its manifest (extension/package.json): commands, the view,
 * settings and context keys. Code refers to these constants, and `contributions.test.ts` checks
 * that the manifest declares exactly them, so a renamed command cannot silently lose its palette
 * entry or menu.
 */

/** Commands declared in the manifest (shown in the palette under the "Troupe" category). */
export const commandIds = {
  startTraining: 'troupe.startTraining',
  stop: 'troupe.stop',
  pause: 'troupe.pause',
  resume: 'troupe.resume',
  openDashboard: 'troupe.openDashboard',
  openTrajectory: 'troupe.openTrajectory',
  compareTrajectories: 'troupe.compareTrajectories',
  exportAdapters: 'troupe.exportAdapters',
  connect: 'troupe.connect',
  restartServer: 'troupe.restartServer',
  filterTrajectories: 'troupe.filterTrajectories',
  refreshRuns: 'troupe.refreshRuns',
  showServerOutput: 'troupe.showServerOutput',
  rerun: 'troupe.rerun',
  renameRun: 'troupe.renameRun',
  deleteRun: 'troupe.deleteRun',
  compareRuns: 'troupe.compareRuns',
} as const;

/**
 * Commands the tree uses internally (its "Load more" rows). Registered but not declared in the
 * manifest, so they never show in the palette.
 */
export const internalCommandIds = {
  loadMoreTrajectories: 'troupe.runs.loadMoreTrajectories',
} as const;

/** The scheme of the config schema the extension serves (config-schema-provider.ts); `onFileSystem:` activates on it. */
export const configSchemaScheme = 'troupe-schema';

/** The manifest's `jsonValidation` url: the config schema, served by the extension. */
export const configSchemaUrl = `${configSchemaScheme}://schemas/experiment-config.schema.json`;

/** The activity bar container and its view. */
export const viewContainerId = 'troupe';
export const runsViewId = 'troupe.runs';

/** Settings, relative to the `troupe` section. */
export const settingKeys = {
  serverUrl: 'server.url',
  serverCommand: 'server.command',
  serverTokenFile: 'server.tokenFile',
} as const;
export const settingsSection = 'troupe';

/** Context key the manifest's `when` clauses read: the connection state's `kind`. */
export const connectionContextKey = 'troupe.connection';

/** Name of the output channel that logs the server and the connection. */
export const serverOutputChannelName = 'Troupe Server';
