export * from './attachment.js';
export * from './mount.js';
export type { ErrorKind } from './errors.js';
