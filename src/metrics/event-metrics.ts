/**
 * Metrics are a fold too (docs/design.md): counters and histograms are derived from events
 * alone (their timestamps, not a clock), so a live agent and `vole metrics --db F --at T`
 * give the same numbers for the same moment. Like a Kubernetes process's counters, they
 * start from zero at each EngineStarted (one engine process's lifetime).
 */
import { Counter, Histogram, type Registry } from 'prom-client';
import type { EventOf, OperationKind, VoleEvent } from '../events/index.js';
import type { CoreReader, CoreWorld } from '../engine/core.js';
import {
  driverLabel,
  grpcCodeLabel,
  kubernetesSecondsBuckets,
  operationName,
  pluginLabel,
} from './names.js';
import { ProvisionMetrics, provisioningMethods } from './provision-metrics.js';

interface InFlight {
  readonly plugin: string;
  readonly driver: string;
  readonly operation: string | undefined;
  readonly startedTsMs: number;
  readonly firstTryKey: string;
}

function histogram<L extends string>(
  name: string,
  help: string,
  labelNames: L[],
  registers: Registry[],
): Histogram<L> {
  return new Histogram({
    name,
    help,
    labelNames,
    buckets: [...kubernetesSecondsBuckets],
    registers,
  });
}

/** The kubelet's reconstruction counters (spec: volumes found on the host at a restart). */
function reconstructionCounters(registers: Registry[]): [Counter, Counter, Counter, Counter] {
  const counter = (name: string, help: string) => new Counter({ name, help, registers });
  return [
    counter(
      'reconstruct_volume_operations_total',
      'The number of volumes that were attempted to be reconstructed from the operating system during kubelet startup. This includes both successful and failed reconstruction.',
    ),
    counter(
      'reconstruct_volume_operations_errors_total',
      'The number of volumes that failed reconstruction from the operating system during kubelet startup.',
    ),
    counter(
      'force_cleaned_failed_volume_operations_total',
      'The number of volumes that were force cleaned after their reconstruction failed during kubelet startup. This includes both successful and failed cleanups.',
    ),
    counter(
      'force_cleaned_failed_volume_operation_errors_total',
      'The number of volumes that failed force cleanup after their reconstruction failed during kubelet startup.',
    ),
  ];
}

export class EventMetrics {
  private readonly inFlight = new Map<string, InFlight>();
  /** When each operation key first tried since its last success (end-to-end latency). */
  private readonly firstTryMs = new Map<string, number>();
  private readonly derived: { reset(): void }[];

  readonly storageOperationDuration: Histogram<
    'volume_plugin' | 'operation_name' | 'status' | 'migrated'
  >;
  readonly operationTotalSeconds: Histogram<'plugin_name' | 'operation_name'>;
  readonly operationTotalErrors: Counter<'plugin_name' | 'operation_name'>;
  readonly csiOperations: Histogram<
    'driver_name' | 'method_name' | 'grpc_status_code' | 'migrated'
  >;
  readonly reconstructTotal: Counter;
  readonly reconstructErrors: Counter;
  readonly forceCleanedTotal: Counter;
  readonly forceCleanedErrors: Counter;
  readonly forcedDetaches: Counter<'reason'>;
  readonly eventsAppended: Counter<'type'>;
  readonly provisioning: ProvisionMetrics;

  constructor(
    registry: Registry,
    private readonly reader: CoreReader<CoreWorld>,
  ) {
    const registers = [registry];
    const nodeOnly = reader.metrics.node ? registers : [];
    this.storageOperationDuration = histogram(
      'storage_operation_duration_seconds',
      'Storage operation duration',
      ['volume_plugin', 'operation_name', 'status', 'migrated'],
      registers,
    );
    this.operationTotalSeconds = histogram(
      'volume_operation_total_seconds',
      'Storage operation end to end duration in seconds',
      ['plugin_name', 'operation_name'],
      registers,
    );
    this.operationTotalErrors = new Counter({
      name: 'volume_operation_total_errors',
      help: 'Total volume operation errors',
      labelNames: ['plugin_name', 'operation_name'],
      registers,
    });
    this.csiOperations = histogram(
      'csi_operations_seconds',
      'Container Storage Interface operation duration with gRPC error code status total',
      ['driver_name', 'method_name', 'grpc_status_code', 'migrated'],
      nodeOnly,
    );
    [
      this.reconstructTotal,
      this.reconstructErrors,
      this.forceCleanedTotal,
      this.forceCleanedErrors,
    ] = reconstructionCounters(nodeOnly);
    this.forcedDetaches = new Counter({
      name: 'attach_detach_controller_attachdetach_controller_forced_detaches',
      help: 'Number of times the A/D Controller performed a forced detach',
      labelNames: ['reason'],
      registers: reader.metrics.controller ? registers : [],
    });
    this.eventsAppended = new Counter({
      name: 'vole_events_appended_total',
      help: 'Events appended to the log since this engine started, by type',
      labelNames: ['type'],
      registers,
    });
    this.provisioning = new ProvisionMetrics(nodeOnly);
    this.derived = [
      ...this.provisioning.metrics,
      this.storageOperationDuration,
      this.operationTotalSeconds,
      this.operationTotalErrors,
      this.csiOperations,
      this.reconstructTotal,
      this.reconstructErrors,
      this.forceCleanedTotal,
      this.forceCleanedErrors,
      this.forcedDetaches,
      this.eventsAppended,
    ];
  }

  /** Folds one event, given the world after it. */
  observe(event: VoleEvent, world: CoreWorld): void {
    if (event.type === 'EngineStarted') this.reset();
    this.eventsAppended.inc({ type: event.type });
    this.provisioning.observe(event, (name) => {
      const pv = this.reader.persistentVolume(world, name);
      return (
        pv && { driver: pv.spec.csi?.driver ?? '', storageClass: pv.spec.storageClassName ?? '' }
      );
    });
    switch (event.type) {
      case 'OperationStarted':
        this.started(event, world);
        break;
      case 'OperationFinished':
        this.finished(event);
        break;
      case 'CallSucceeded':
      case 'CallFailed':
        this.rpc(event);
        break;
      case 'HostObserved':
        this.reconstructed(event);
        break;
      default:
        break;
    }
  }

  private reset(): void {
    for (const metric of this.derived) metric.reset();
    this.provisioning.reset();
    this.inFlight.clear();
    this.firstTryMs.clear();
  }

  private started(event: EventOf<'OperationStarted'>, world: CoreWorld): void {
    const spec = this.reader.operationSpec(world, event);
    const block = spec?.traits.volumeMode === 'Block';
    const firstTryKey = `${event.op}|${event.key.volume}|${event.key.pod}|${event.key.node}`;
    if (!this.firstTryMs.has(firstTryKey)) this.firstTryMs.set(firstTryKey, event.tsMs);
    const provisioner = this.provisioning.driverOf(event.opId);
    this.inFlight.set(event.opId, {
      plugin: provisioner === undefined ? pluginLabel(spec) : `kubernetes.io/csi:${provisioner}`,
      driver: provisioner ?? driverLabel(spec),
      operation: operationName(event.op as OperationKind, block),
      startedTsMs: event.tsMs,
      firstTryKey,
    });
    if (event.forced !== undefined) this.forcedDetaches.inc({ reason: event.forced });
  }

  private finished(event: EventOf<'OperationFinished'>): void {
    const op = this.inFlight.get(event.opId);
    if (op === undefined) return; // started before this engine: not this process's to count
    this.inFlight.delete(event.opId);
    if (op.operation === undefined) return;
    const seconds = Math.max(0, event.tsMs - op.startedTsMs) / 1000;
    const ok = event.outcome === 'ok';
    this.storageOperationDuration.observe(
      {
        volume_plugin: op.plugin,
        operation_name: op.operation,
        status: ok ? 'success' : 'fail-unknown',
        migrated: 'false',
      },
      seconds,
    );
    const labels = { plugin_name: op.plugin, operation_name: op.operation };
    if (!ok) {
      this.operationTotalErrors.inc(labels);
      return;
    }
    const firstMs = this.firstTryMs.get(op.firstTryKey) ?? op.startedTsMs;
    this.firstTryMs.delete(op.firstTryKey);
    this.operationTotalSeconds.observe(labels, Math.max(0, event.tsMs - firstMs) / 1000);
  }

  private rpc(event: EventOf<'CallSucceeded'> | EventOf<'CallFailed'>): void {
    if (event.rpc === undefined || provisioningMethods.has(event.rpc.method)) return;
    const driver = this.inFlight.get(event.opId)?.driver ?? '';
    this.csiOperations.observe(
      {
        driver_name: driver,
        method_name: event.rpc.method,
        grpc_status_code: grpcCodeLabel(event.rpc.code),
        migrated: 'false',
      },
      event.rpc.durationMs / 1000,
    );
  }

  /**
   * A restart's host check is vole's reconstruction: each pair it reported on was
   * reconstructed from the host; one found absent was settled without a plugin call (the
   * kubelet's force cleanup of a volume it could not reconstruct).
   */
  private reconstructed(event: EventOf<'HostObserved'>): void {
    if (!this.reader.metrics.node) return;
    this.reconstructTotal.inc(event.attachments.length + event.mounts.length);
    const absent =
      event.attachments.filter((a) => a.attached === false || a.deviceMounted === false).length +
      event.mounts.filter((m) => !m.mounted).length;
    this.forceCleanedTotal.inc(absent);
  }
}
