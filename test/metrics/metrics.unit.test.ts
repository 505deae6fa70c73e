/**
 * Metrics as a fold of the log: `vole metrics --db F --at T` on simulated logs, the
 * Kubernetes names and labels, counters that start at each engine start, and promtool's
 * verdict on the exposition.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { kubeletCore } from '../../src/engine/cores.js';
import { openSimulationLog } from '../../src/cli/sqlite-sink.js';
import { metricsAtMoment } from '../../src/cli/metrics.js';
import type { VoleEvent } from '../../src/events/index.js';
import { VoleMetrics } from '../../src/metrics/index.js';
import { grpcCodeLabel } from '../../src/metrics/names.js';
import { parseMetricsAddress } from '../../src/metrics/server.js';
import { parseScenario } from '../../src/sim/scenario.js';
import { simulate } from '../../src/sim/simulate.js';
import { fold, initialWorld } from '../../src/kubelet/index.js';

const dir = mkdtempSync(join(tmpdir(), 'vole-metrics-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const hasPromtool = spawnSync('promtool', ['--version']).status === 0;

const simulatedDbs = new Map<string, string>();

async function simulated(scenario: string): Promise<string> {
  const done = simulatedDbs.get(scenario);
  if (done !== undefined) return done;
  const db = join(dir, `${scenario}.db`);
  simulatedDbs.set(scenario, db);
  const text = readFileSync(join(import.meta.dirname, '../scenarios', `${scenario}.yaml`), 'utf8');
  const parsed = parseScenario(text, scenario);
  const log = openSimulationLog(db, parsed.mode === 'controller' ? 'controller' : 'kubelet');
  const result = await simulate(parsed, { log });
  log.sink.close();
  assert.ok(result.ok, JSON.stringify(result.failures));
  return db;
}

function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
}

function promtoolWarnings(text: string): string[] {
  const check = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  return `${check.stdout}${check.stderr}`.split('\n').filter((l) => l.trim() !== '');
}

test('a failing attach and a retried mount: durations, end-to-end latency and errors by Kubernetes name', async () => {
  const db = await simulated('kubelet-attach-mount');
  const text = await metricsAtMoment(db, undefined);
  const csi = 'volume_plugin="kubernetes.io/csi:fake.disk"';
  assert.ok(
    (sample(
      text,
      `storage_operation_duration_seconds_count{${csi},operation_name="volume_attach",status="success",migrated="false"}`,
    ) ?? 0) >= 1,
    text,
  );
  assert.match(text, /# TYPE volume_manager_total_volumes gauge/);
  assert.match(text, /# TYPE storage_operation_duration_seconds histogram/);
  assert.match(text, /storage_operation_duration_seconds_bucket\{le="600",/);
  assert.doesNotMatch(text, /storage_operation_errors_total|storage_operation_status_count/);
  assert.doesNotMatch(text, /attachdetach_controller/);
  assert.equal(sample(text, 'vole_log_seq'), Number(/vole_log_seq (\d+)/.exec(text)![1]));
});

test('counters start at zero at each engine start; --at shows any earlier moment', async () => {
  const db = await simulated('restart-mid-setup');
  const end = await metricsAtMoment(db, undefined);
  const first = await metricsAtMoment(db, '3');
  assert.equal(sample(first, 'vole_events_appended_total{type="EngineStarted"}'), 1);
  assert.equal(sample(first, 'vole_log_seq'), 3);
  // After the restart the counters hold only the second engine's events.
  assert.equal(sample(end, 'vole_events_appended_total{type="EngineStarted"}'), 1);
  const appended = [...end.matchAll(/^vole_events_appended_total\{[^}]*\} (\d+)$/gm)].reduce(
    (sum, m) => sum + Number(m[1]),
    0,
  );
  const seq = sample(end, 'vole_log_seq')!;
  assert.ok(appended < seq, `${appended} events since the restart, of ${seq}`);
  assert.ok((sample(end, 'reconstruct_volume_operations_total') ?? -1) >= 0);
});

test('the controller exposes its own names; a forced detach is counted by reason', async () => {
  const db = await simulated('controller-out-of-service');
  const text = await metricsAtMoment(db, undefined);
  assert.equal(
    sample(
      text,
      'attach_detach_controller_attachdetach_controller_forced_detaches{reason="out-of-service"}',
    ),
    1,
  );
  assert.match(text, /# TYPE attachdetach_controller_total_volumes gauge/);
  assert.match(text, /# TYPE storage_count_attachable_volumes_in_use gauge/);
  assert.doesNotMatch(text, /volume_manager_total_volumes|kubelet_volume_stats/);
  if (hasPromtool) {
    assert.deepEqual(promtoolWarnings(text), [
      'attach_detach_controller_attachdetach_controller_forced_detaches counter metrics should have "_total" suffix',
    ]);
  }
});

test(
  'promtool: a node exposition with operation errors warns only of the Kubernetes counter name',
  { skip: hasPromtool ? false : 'promtool not installed' },
  async () => {
    const db = await simulated('detach-failure-retried');
    const text = await metricsAtMoment(db, undefined);
    assert.ok(
      (/volume_operation_total_errors\{[^}]*\} (\d+)/.exec(text)?.[1] ?? '0') !== '0',
      text,
    );
    assert.deepEqual(promtoolWarnings(text), [
      'volume_operation_total_errors counter metrics should have "_total" suffix',
    ]);
  },
);

test('csi_operations_seconds comes from the rpc field of call outcomes', async () => {
  const db = await simulated('kubelet-attach-mount');
  const metrics = new VoleMetrics({ source: { reader: kubeletCore.reader, world: () => world } });
  const world = initialWorld();
  const { openReadonly } = await import('../../src/postmortem/open.js');
  const store = openReadonly(db);
  for (const event of store.read({})) {
    const withRpc: VoleEvent =
      event.type === 'CallSucceeded' && event.call === 'setUp'
        ? {
            ...event,
            rpc: { method: '/csi.v1.Node/NodePublishVolume', code: 'OK', durationMs: 250 },
          }
        : event;
    fold(world, withRpc);
    metrics.observe(withRpc, world);
  }
  store.close();
  const text = await metrics.text();
  const series =
    'csi_operations_seconds_count{driver_name="fake.disk",method_name="/csi.v1.Node/NodePublishVolume",grpc_status_code="OK",migrated="false"}';
  assert.ok((sample(text, series) ?? 0) >= 1, text);
  assert.match(text, /csi_operations_seconds_bucket\{le="0.25",driver_name="fake.disk"/);
});

test("a CSI driver's calls, through the real gRPC client: csi_operations_seconds by method and Go's code names", async () => {
  const db = await simulated('csi-expand-failed-precondition');
  const text = await metricsAtMoment(db, undefined);
  const series = (method: string, code: string) =>
    `csi_operations_seconds_count{driver_name="fake.csi.example.com",method_name="/csi.v1.Node/${method}",grpc_status_code="${code}",migrated="false"}`;
  assert.equal(sample(text, series('NodeStageVolume', 'OK')), 2, text);
  assert.equal(sample(text, series('NodeExpandVolume', 'FailedPrecondition')), 1);
  assert.equal(sample(text, series('NodeExpandVolume', 'Internal')), 1);
  assert.match(
    text,
    /volume_plugin="kubernetes\.io\/csi:fake\.csi\.example\.com",operation_name="expand_volume",status="fail-unknown"/,
  );
  assert.equal(grpcCodeLabel('DEADLINE_EXCEEDED'), 'DeadlineExceeded');
  assert.equal(grpcCodeLabel('CANCELLED'), 'Canceled');
  assert.equal(grpcCodeLabel('OK'), 'OK');
});

test('--metrics-address: HOST:PORT, or a message that says what to give', () => {
  assert.deepEqual(parseMetricsAddress('127.0.0.1:9102'), { host: '127.0.0.1', port: 9102 });
  assert.deepEqual(parseMetricsAddress('[::1]:0'), { host: '::1', port: 0 });
  assert.match(String(parseMetricsAddress('9102')), /give HOST:PORT/);
  assert.match(String(parseMetricsAddress('127.0.0.1:99999')), /give HOST:PORT/);
});
