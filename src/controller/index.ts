/** The attach/detach controller: its world, fold, planner and executor as an engine core. */
import type { Core } from '../agent/engine.js';
import { foldController, initialControllerWorld } from './fold.js';
import { type ControllerOperation, describeControllerOperation, planController } from './plan.js';
import type { ControllerWorld } from './types.js';

export const controllerCore: Core<ControllerWorld, ControllerOperation> = {
  initialWorld: initialControllerWorld,
  fold: foldController,
  plan: planController,
  describe: describeControllerOperation,
  volumeOf: (op) => op.volume,
};

export { ControllerExecutor } from './executor.js';
export { attachmentVerifyPeriodMs, startAttachmentVerifier } from './verify-attachments.js';
export * from './fold.js';
export * from './plan.js';
export * from './types.js';
