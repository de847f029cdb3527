/** The config file of each bench:learning method, in configs/<environment>/ (bench-learning.ts's header says what each compares). */
export const METHOD_CONFIGS: Readonly<Record<string, string>> = {
  'at-grpo': 'L2-lora.json',
  grpo: 'L2-grpo.json',
  single: 'L0-single.json',
  'single-grpo': 'L0-single-grpo.json',
  shared: 'L1-shared.json',
  separate: 'L3-separate.json',
  'single-tool': 'L0-single-tool.json',
  ppo: 'L2-lora-ppo.json',
  'shared-ppo': 'L1-shared-ppo.json',
};

/** The environments whose configs live in configs/<name>/. */
const CONFIG_FOLDERS = ['plan-path', 'sokoban', 'sudoku', 'tic-tac-toe', 'math', 'code', 'hanabi'];

/**
 * The configs a bench:learning entry (LEARNING_ENVS) names: `plan-path` is configs/plan-path/{L2-lora,
 * L2-grpo,L0-single}.json; `plan-path-7x7`, an environment and a suffix, is
 * configs/plan-path/L2-lora-7x7.json and so on (configs live in a folder named after their environment).
 */
function configSet(entry: string): { folder: string; suffix: string } {
  const folder = CONFIG_FOLDERS.find((e) => entry === e || entry.startsWith(`${e}-`));
  if (!folder) throw new Error(`LEARNING_ENVS: ${JSON.stringify(entry)} names no environment's configs (${CONFIG_FOLDERS.join(', ')}, optionally with a suffix such as plan-path-7x7)`);
  return { folder, suffix: entry.slice(folder.length) };
}

/** The config file of `variant` for a bench:learning entry, relative to the repository: configs/<folder>/<file>. */
export function methodConfigPath(entry: string, variant: string): { folder: string; file: string; rel: string } {
  const base = METHOD_CONFIGS[variant];
  if (!base) throw new Error(`variant: unknown ${JSON.stringify(variant)} (${Object.keys(METHOD_CONFIGS).join(', ')})`);
  const { folder, suffix } = configSet(entry);
  const file = base.replace(/\.json$/, `${suffix}.json`);
  return { folder, file, rel: `configs/${folder}/${file}` };
}
