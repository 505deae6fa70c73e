/**
 * The controller's plugins, fenced: no attach or detach (for a CSI driver:
 * ControllerPublishVolume, ControllerUnpublishVolume) starts before the events announcing
 * it are durable in the etcd log of the current term. A plugin registered later — a CSI
 * driver that registers itself — is fenced the same way.
 */
import { assert } from '../assert.js';
import { callCutOff } from '../plugins/call-target.js';
import { PluginManager } from '../plugins/manager.js';
import type { CallTarget, VolumePlugin } from '../plugins/types.js';

/** Resolves once what the engine appended so far is durable; rejects when it never will be. */
export type DurableGate = () => Promise<void>;

function fencePlugin(plugin: VolumePlugin, durable: DurableGate): VolumePlugin {
  const attacher = plugin.attacher;
  if (attacher === undefined) return plugin;
  const gate = async (target: CallTarget, call: string) => {
    assert(target.node !== '', () => `${plugin.name}: ${call} names no node`);
    await durable();
    if (callCutOff(target))
      throw new Error(`${call} cut off before it started (the controller stopped or timed out)`);
  };
  return {
    ...plugin,
    attacher: {
      ...attacher,
      attach: async (spec, target) => (await gate(target, 'attach'), attacher.attach(spec, target)),
      detach: async (spec, target) => (await gate(target, 'detach'), attacher.detach(spec, target)),
    },
  };
}

export class FencedPluginManager extends PluginManager {
  constructor(
    private readonly durable: DurableGate,
    plugins: readonly VolumePlugin[] = [],
  ) {
    super();
    for (const plugin of plugins) this.register(plugin);
  }

  /** register() and a CSI driver's re-registration both come through here. */
  override upsert(plugin: VolumePlugin): void {
    super.upsert(fencePlugin(plugin, this.durable));
    assert(
      plugin.attacher === undefined || this.find(plugin.name)?.attacher !== plugin.attacher,
      () => `${plugin.name}: registered with an attacher that is not fenced`,
    );
  }
}
