/** The attach/detach controller: its world, fold, planner and executor (its core: src/engine/cores.ts). */
export { ControllerExecutor } from './executor.js';
export { startAttachmentVerifier } from './verify-attachments.js';
export * from './fold.js';
export * from './plan.js';
export * from './types.js';
