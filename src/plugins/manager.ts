/**
 * The plugin manager: registered plugins by name. Resolution picks the plugin from the
 * volume source (a CSI driver name or a built-in source type), so "exactly one plugin per
 * spec" holds by construction; registering a name twice is refused.
 */
import type { PluginCaps } from '../events/index.js';
import type { VolumePlugin } from './types.js';

export class PluginRegistrationError extends Error {
  override name = 'PluginRegistrationError';
}

export class PluginManager {
  private readonly plugins = new Map<string, VolumePlugin>();

  constructor(plugins: readonly VolumePlugin[] = []) {
    for (const plugin of plugins) this.register(plugin);
  }

  register(plugin: VolumePlugin): void {
    if (this.plugins.has(plugin.name)) {
      throw new PluginRegistrationError(
        `volume plugin "${plugin.name}" is registered twice; each name must map to exactly one plugin`,
      );
    }
    this.upsert(plugin);
  }

  /**
   * Registers the plugin, replacing one of the same name: a CSI driver that registers
   * again (restarted, or with other capabilities) is served by its new plugin from now on.
   */
  upsert(plugin: VolumePlugin): void {
    if (plugin.caps.name !== plugin.name) {
      throw new PluginRegistrationError(
        `plugin "${plugin.name}" declares caps for "${plugin.caps.name}"`,
      );
    }
    // An attacher without caps.attachable is allowed: every CSI plugin has attacher ops, as
    // every CSI driver has Kubernetes' csiAttacher, whether or not the driver publishes.
    if (plugin.caps.attachable && plugin.attacher === undefined) {
      throw new PluginRegistrationError(
        `plugin "${plugin.name}": caps.attachable needs an attacher`,
      );
    }
    if (plugin.caps.deviceMountable !== (plugin.deviceMounter !== undefined)) {
      throw new PluginRegistrationError(
        `plugin "${plugin.name}": caps.deviceMountable must match having a deviceMounter`,
      );
    }
    if (plugin.caps.blockMappable !== (plugin.blockMapper !== undefined)) {
      throw new PluginRegistrationError(
        `plugin "${plugin.name}": caps.blockMappable must match having a blockMapper`,
      );
    }
    this.plugins.set(plugin.name, plugin);
  }

  /** The plugin of that name, or undefined (the executor turns that into a final error). */
  find(name: string): VolumePlugin | undefined {
    return this.plugins.get(name);
  }

  /** Capabilities of every plugin, sorted by name: recorded in EngineStarted. */
  catalog(): PluginCaps[] {
    return [...this.plugins.values()]
      .map((p) => p.caps)
      .sort((a, b) => a.name.localeCompare(b.name));
  }
}
