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
