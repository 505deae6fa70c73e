export * from './explain.js';
export * from './history.js';
export * from './jsonl.js';
export * from './replay.js';
export * from './verify.js';
export * from './log-world.js';
