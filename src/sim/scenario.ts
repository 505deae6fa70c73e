/**
 * The scenario file format of docs/scenarios.md, validated strictly: unknown keys, wrong types
 * and bad durations are errors naming the field (exit 2). Kubernetes objects inside it
 * keep every field they have, as Kubernetes would.
 */
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { manifestObject, pod } from '../events/k8s.js';
import { pluginCallNames } from '../events/types.js';
import type { FaultEntry, FaultScript } from '../plugins/fake.js';
import { parseDurationMs } from './duration.js';

const duration = z.union([z.string(), z.number().nonnegative()]).transform((value, ctx) => {
  if (typeof value === 'number') return value;
  const ms = parseDurationMs(value);
  if (ms === undefined) {
    ctx.addIssue({ code: 'custom', message: `bad duration "${value}": use e.g. 500ms, 10s, 2m` });
    return z.NEVER;
  }
  return ms;
});

const outcome = z.enum(['ok', 'transient', 'uncertain', 'final', 'failedPrecondition']);

const faultEntry = z
  .union([
    outcome,
    z.strictObject({ delay: duration }),
    z.strictObject({ hang: z.literal(true) }),
    z.strictObject({
      outcome,
      times: z.number().int().positive().optional(),
      always: z.literal(true).optional(),
      delay: duration.optional(),
    }),
  ])
  .transform((entry): FaultEntry => {
    if (typeof entry === 'string') return { outcome: entry, delayMs: 0, times: 1 };
    if ('hang' in entry) return { outcome: 'hang', delayMs: 0, times: 1 };
    if ('outcome' in entry) {
      const times = entry.always === true ? Number.POSITIVE_INFINITY : (entry.times ?? 1);
      return { outcome: entry.outcome, delayMs: entry.delay ?? 0, times };
    }
    return { outcome: 'ok', delayMs: entry.delay, times: 1 };
  });

const callName = z.enum(pluginCallNames);

const faultScript = z.partialRecord(
  callName,
  z.array(faultEntry),
) as unknown as z.ZodType<FaultScript>;

/** The RPCs a scripted CSI driver answers (its fault keys and `counts` names). */
export const csiScriptedRpcs = [
  'ControllerPublishVolume',
  'ControllerUnpublishVolume',
  'NodeStageVolume',
  'NodeUnstageVolume',
  'NodePublishVolume',
  'NodeUnpublishVolume',
  'NodeExpandVolume',
  'CreateVolume',
  'DeleteVolume',
  'ControllerExpandVolume',
] as const;

/** A gRPC status by name (`DEADLINE_EXCEEDED`); OK is `ok`. */
const grpcCodeName = z.enum([
  'CANCELLED',
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'DATA_LOSS',
  'UNAUTHENTICATED',
]);

const csiFaultEntry = z
  .union([
    z.literal('ok'),
    z.strictObject({ delay: duration }),
    z.strictObject({ hang: z.literal(true) }),
    z.strictObject({ grpc: grpcCodeName }),
    z.strictObject({ disconnect: z.literal(true) }),
  ])
  .transform((entry): FaultEntry => {
    if (entry === 'ok') return { outcome: 'ok', delayMs: 0, times: 1 };
    if ('hang' in entry) return { outcome: 'hang', delayMs: 0, times: 1 };
    if ('grpc' in entry) return { outcome: 'grpc', code: entry.grpc, delayMs: 0, times: 1 };
    if ('disconnect' in entry) return { outcome: 'disconnect', delayMs: 0, times: 1 };
    return { outcome: 'ok', delayMs: entry.delay, times: 1 };
  });

const csiFaultScript = z.partialRecord(
  z.enum(csiScriptedRpcs),
  z.array(csiFaultEntry),
) as unknown as z.ZodType<FaultScript>;

/** A scripted CSI driver's capabilities (docs/scenarios.md). */
const csiDriver = z.strictObject({
  publishUnpublish: z.boolean().optional(),
  stageUnstage: z.boolean().optional(),
  expand: z.boolean().optional(),
  maxVolumesPerNode: z.number().int().nonnegative().optional(),
  /** Controller capability CREATE_DELETE_VOLUME. */
  createDelete: z.boolean().optional(),
  /** Controller capability EXPAND_VOLUME. */
  controllerExpand: z.boolean().optional(),
  /** NodeGetInfo answers {topologyKey: the node's zone}. */
  topologyKey: z.string().min(1).optional(),
  /** Each simulated node's zone for topologyKey. */
  zones: z.record(z.string(), z.string()).optional(),
  /** What the backend can still give; beyond: OUT_OF_RANGE. */
  capacityBytes: z.number().int().nonnegative().optional(),
});

/** A scripted CSI driver: its capabilities, and faults keyed by RPC. */
const csiPluginEntry = z.strictObject({
  name: z.string().min(1),
  csi: csiDriver,
  faults: csiFaultScript.optional(),
  volumeFaults: z.record(z.string(), csiFaultScript).optional(),
});

const plainPlugin = z.strictObject({
  name: z.string().min(1),
  attachable: z.boolean().optional(),
  deviceMountable: z.boolean().optional(),
  blockMappable: z.boolean().optional(),
  nodeExpandable: z.boolean().optional(),
  requiresFSResize: z.boolean().optional(),
  requiresRemount: z.boolean().optional(),
  faults: faultScript.optional(),
  volumeFaults: z.record(z.string(), faultScript).optional(),
});

type PluginEntry = z.output<typeof plainPlugin> | z.output<typeof csiPluginEntry>;

/** A scripted plugin, or with a `csi:` key a scripted CSI driver (errors name the entry's own fields). */
const plugin = z.unknown().transform((value, ctx): PluginEntry => {
  const isCsi = value !== null && typeof value === 'object' && 'csi' in value;
  const parsed = (isCsi ? csiPluginEntry : plainPlugin).safeParse(value);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) ctx.addIssue({ ...issue });
    return z.NEVER;
  }
  return parsed.data;
});

const expectation = z.strictObject({
  counts: z.record(z.string(), z.record(z.string(), z.number().int().nonnegative())).optional(),
  attachments: z.record(z.string(), z.string()).optional(),
  mounts: z.record(z.string(), z.string()).optional(),
  volumesInUse: z.array(z.string()).optional(),
  podReady: z.union([z.string(), z.array(z.string())]).optional(),
  /** `NAMESPACE/CLAIM` → the PV it is bound to, or null: not bound. */
  bindings: z.record(z.string(), z.string().nullable()).optional(),
  /** PV name → its phase, null (no such PV), or an object of the `state.pvs` fields it names. */
  pvs: z
    .record(
      z.string(),
      z.union([
        z.string(),
        z.null(),
        z.strictObject({
          phase: z.string().optional(),
          claim: z.string().nullable().optional(),
          volumeHandle: z.string().nullable().optional(),
          capacityBytes: z.number().nullable().optional(),
          reclaimPolicy: z.string().nullable().optional(),
          zone: z.string().nullable().optional(),
        }),
      ]),
    )
    .optional(),
});
export type Expectation = z.infer<typeof expectation>;

const objectRef = z.strictObject({
  kind: z.enum([
    'PersistentVolume',
    'PersistentVolumeClaim',
    'StorageClass',
    'Node',
    'ConfigMap',
    'Secret',
  ]),
  name: z.string().min(1),
  namespace: z.string().optional(),
});

/**
 * A scenario's pod names its UID: steps, waits and expectations name pods by UID, and a
 * scenario must replay the same (a UID drawn when the pod appears could not be named).
 */
const scenarioPod = pod.refine((p) => p.metadata.uid !== undefined, {
  message: 'metadata.uid is required in a scenario (pods are named by UID everywhere)',
  path: ['metadata', 'uid'],
});

const stepSchemas = {
  addPod: scenarioPod,
  updatePod: scenarioPod,
  removePod: z.string().min(1),
  advance: duration,
  addObject: manifestObject,
  updateObject: manifestObject,
  removeObject: objectRef,
  reportInUse: z.array(z.string()),
  controllerAttach: z.array(z.string()),
  restart: z.strictObject({}),
  waitForPod: z.strictObject({ pod: z.string().min(1), timeout: duration.optional() }),
  expect: expectation,
  nodeStatus: z.strictObject({ node: z.string(), volumesInUse: z.array(z.string()) }),
  nodeReady: z.strictObject({ node: z.string(), ready: z.boolean() }),
  taint: z.strictObject({
    node: z.string(),
    key: z.string(),
    effect: z.string().optional(),
    value: z.string().optional(),
  }),
  untaint: z.strictObject({ node: z.string(), key: z.string() }),
  removeNode: z.string().min(1),
} as const;
type StepSchemas = typeof stepSchemas;
export type Step = {
  [K in keyof StepSchemas]: { [P in K]: z.output<StepSchemas[K]> };
}[keyof StepSchemas];

/** A step is an object with exactly one key naming its kind; its value is checked by kind. */
const step = z.unknown().transform((value, ctx): Step => {
  const keys =
    value !== null && typeof value === 'object' && !Array.isArray(value) ? Object.keys(value) : [];
  const kind = keys[0] as keyof StepSchemas | undefined;
  if (keys.length !== 1 || kind === undefined || !(kind in stepSchemas)) {
    ctx.addIssue({
      code: 'custom',
      message:
        `a step is one of ${Object.keys(stepSchemas).join(', ')} ` +
        `(got ${keys.length === 0 ? JSON.stringify(value) : keys.map((k) => `"${k}"`).join(', ')})`,
    });
    return z.NEVER;
  }
  const parsed = stepSchemas[kind].safeParse((value as Record<string, unknown>)[kind]);
  if (!parsed.success) {
    for (const issue of parsed.error.issues)
      ctx.addIssue({ ...issue, path: [kind, ...issue.path] });
    return z.NEVER;
  }
  return { [kind]: parsed.data } as Step;
});

const scenarioSchema = z.strictObject({
  name: z.string().min(1),
  node: z.string().min(1).default('node-1'),
  mode: z.enum(['kubelet', 'controller']).default('kubelet'),
  controllerAttachDetach: z.boolean().default(true),
  nodes: z.array(z.string().min(1)).optional(),
  maxWaitForUnmount: duration.optional(),
  disableForceDetachOnTimeout: z.boolean().optional(),
  plugins: z.array(plugin).default([]),
  objects: z.array(manifestObject).default([]),
  steps: z.array(step).min(1, 'a scenario needs at least one step'),
});
export type Scenario = z.infer<typeof scenarioSchema>;
export type ScenarioPlugin = z.infer<typeof plugin>;

export class ScenarioFormatError extends Error {
  override name = 'ScenarioFormatError';
}

function describeIssue(issue: z.core.$ZodIssue): string {
  const path = issue.path.length === 0 ? '(file)' : issue.path.map(String).join('.');
  if (issue.code === 'unrecognized_keys')
    return `${path}: unknown key(s) ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
  if (issue.code === 'invalid_union') {
    const nested = issue.errors
      .flat()
      .filter((i) => i.code !== 'invalid_type' || i.path.length > 0);
    // The deepest issue names the field best; a key only another form requires (a union's
    // `csi:`) says less than a wrong value the user did write.
    const missing = (i: z.core.$ZodIssue) => (isMissing(i) ? 1 : 0);
    const best = nested.sort((a, b) => missing(a) - missing(b) || b.path.length - a.path.length)[0];
    if (best !== undefined) return describeIssue({ ...best, path: [...issue.path, ...best.path] });
    return `${path}: not one of the allowed forms`;
  }
  if (isMissing(issue)) return `${path}: missing (a required key)`;
  return `${path}: ${issue.message}`;
}

const isMissing = (issue: z.core.$ZodIssue) =>
  issue.code === 'invalid_type' && / received undefined$/.test(issue.message);

/** Parses YAML or JSON text; throws ScenarioFormatError naming the field and the problem. */
export function parseScenario(text: string, source = 'scenario'): Scenario {
  let raw: unknown;
  try {
    raw = parseYaml(text, { prettyErrors: true, uniqueKeys: true });
  } catch (error) {
    throw new ScenarioFormatError(`${source}: not valid YAML or JSON: ${(error as Error).message}`);
  }
  const result = scenarioSchema.safeParse(raw);
  if (!result.success) {
    const lines = result.error.issues.slice(0, 5).map(describeIssue);
    throw new ScenarioFormatError(`${source}: invalid scenario:\n  ${lines.join('\n  ')}`);
  }
  return result.data;
}
