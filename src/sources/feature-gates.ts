/**
 * Feature gates, as Kubernetes spells them (`--feature-gates EmptyDirVolumeMode=true`):
 * the alpha fields vole honours only when their gate is on. With a gate off, the field is
 * dropped where pods come in, as the API server's dropDisabledFields (pkg/api/pod/util.go)
 * drops it before validating, and the kubelet's plugin ignores it too.
 */

/**
 * The gates vole knows, with their defaults (pkg/features/kube_features.go).
 * EmptyDirVolumeMode (alpha in 1.37, off by default): emptyDir.mode sets the permission
 * bits of the volume's directory.
 */
export const featureGateDefaults = { EmptyDirVolumeMode: false } as const;

export type FeatureGateName = keyof typeof featureGateDefaults;
export type FeatureGates = Readonly<Record<FeatureGateName, boolean>>;

export const defaultFeatureGates: FeatureGates = featureGateDefaults;

function isGateName(name: string): name is FeatureGateName {
  return Object.hasOwn(featureGateDefaults, name);
}

/**
 * `A=true,B=false` → the gates (the others at their defaults). Throws an Error that names
 * the part at fault and what would be accepted, as the kubelet refuses an unknown gate.
 */
export function parseFeatureGates(text: string | undefined): FeatureGates {
  const gates: Record<FeatureGateName, boolean> = { ...featureGateDefaults };
  if (text === undefined || text.trim() === '') return gates;
  for (const part of text.split(',')) {
    const [name = '', value, ...rest] = part.trim().split('=');
    if (!isGateName(name))
      throw new Error(
        `--feature-gates: unrecognized feature gate "${name}" (vole knows: ${Object.keys(featureGateDefaults).join(', ')})`,
      );
    if (rest.length > 0 || (value !== 'true' && value !== 'false'))
      throw new Error(`--feature-gates: give ${name}=true or ${name}=false, not "${part.trim()}"`);
    gates[name] = value === 'true';
  }
  return gates;
}

/** A field a disabled gate dropped from a pod, and the volume it was on. */
export interface DroppedField {
  readonly volume: string;
  readonly field: string;
  readonly gate: FeatureGateName;
}

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * A Pod document without the fields of disabled gates (dropDisabledFields): with
 * EmptyDirVolumeMode off, each emptyDir loses its mode. Returns the document unchanged
 * (the same object) when nothing is dropped.
 */
export function dropDisabledPodFields(
  doc: unknown,
  gates: FeatureGates,
): { doc: unknown; dropped: DroppedField[] } {
  const volumes = isObject(doc) && isObject(doc['spec']) ? doc['spec']['volumes'] : undefined;
  if (gates.EmptyDirVolumeMode || !Array.isArray(volumes)) return { doc, dropped: [] };
  const dropped: DroppedField[] = [];
  const kept = volumes.map((volume: unknown) => {
    if (!isObject(volume) || !isObject(volume['emptyDir']) || !('mode' in volume['emptyDir']))
      return volume;
    const { mode: _mode, ...emptyDir } = volume['emptyDir'];
    const name = typeof volume['name'] === 'string' ? volume['name'] : '?';
    dropped.push({ volume: name, field: 'emptyDir.mode', gate: 'EmptyDirVolumeMode' });
    return { ...volume, emptyDir };
  });
  if (dropped.length === 0) return { doc, dropped };
  const pod = doc as Json;
  return { doc: { ...pod, spec: { ...(pod['spec'] as Json), volumes: kept } }, dropped };
}
