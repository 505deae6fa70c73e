export * from './exec.js';
export * from './fs.js';
export * from './loop.js';
export * from './mount.js';
export * from './mountinfo.js';
export * from './paths.js';
