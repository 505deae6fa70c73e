/**
 * A live agent's /metrics, checked by Debian's promtool and scraped by a real Prometheus
 * server, and equal to `vole metrics --db` for the same seq (metrics are a fold too).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { hostSandbox, hostTestSkipReason } from '../support/host.js';
import { repo, startVole, vole } from '../support/agent-process.js';

const skip = hostTestSkipReason();
const { base, root } = skip === false ? hostSandbox('metrics') : { base: '', root: '' };
const hasPrometheus = spawnSync('prometheus', ['--version']).status === 0;

/** The Kubernetes counters whose names promtool wants to end in _total (kept as Kubernetes has them). */
export const knownNamingWarnings = new Set([
  'volume_operation_total_errors',
  'attach_detach_controller_attachdetach_controller_forced_detaches',
]);

function samples(text: string, keep: (name: string) => boolean): string[] {
  return text
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#') && keep(l.split(/[{ ]/)[0]!))
    .sort();
}

function value(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
}

/** The event-derived metrics: everything but statfs of live volumes and commit timings. */
const eventDerived = (name: string) =>
  !name.startsWith('kubelet_volume_stats_') && !name.startsWith('vole_append_latency_seconds');

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function scrape(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`);
  assert.equal(res.status, 200);
  return res.text();
}

async function eventually<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await probe().catch(() => undefined);
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

test(
  'host: a live agent serves metrics promtool accepts, Prometheus scrapes, and the log replays',
  { skip, timeout: 180_000 },
  async (t) => {
    const manifests = join(base, 'manifests');
    const db = join(base, 'vole.db');
    mkdirSync(manifests, { recursive: true });
    cpSync(join(repo, 'examples/manifests'), manifests, { recursive: true });
    const agent = startVole([
      'run',
      '--manifests',
      manifests,
      '--root',
      root,
      '--db',
      db,
      '--metrics-address',
      '127.0.0.1:0',
    ]);
    t.after(() => agent.stop());
    const url = (await agent.line(/metrics on (http:\/\/[0-9.:]+)\/metrics/))[1]!;
    assert.equal((await fetch(`${url}/healthz`)).status, 200);

    // The demo's two pods: web's data (disk claim), cache and logs, batch's scratch.
    const settled = await eventually('4 mounted volumes', async () => {
      const text = await scrape(url);
      const mounted = samples(text, (n) => n === 'volume_manager_total_volumes')
        .filter((l) => l.includes('state="actual_state_of_world"'))
        .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
      return mounted === 4 && (await fetch(`${url}/readyz`)).status === 200 ? text : undefined;
    });
    assert.match(
      settled,
      /volume_manager_total_volumes\{plugin_name="kubernetes.io\/csi:disk.vole.dev",state="actual_state_of_world"\} 1/,
    );
    assert.match(
      settled,
      /storage_operation_duration_seconds_bucket\{le="0.1",volume_plugin="kubernetes.io\/csi:disk.vole.dev",operation_name="volume_attach",status="success",migrated="false"\}/,
    );
    const capacity = value(
      settled,
      'kubelet_volume_stats_capacity_bytes{namespace="default",persistentvolumeclaim="web-data"}',
    );
    assert.ok(
      capacity !== undefined && capacity > 40 * 2 ** 20 && capacity <= 64 * 2 ** 20,
      `capacity ${capacity}`,
    );
    assert.ok(!/persistentvolumeclaim="scratch"/.test(settled), 'only claim volumes have stats');
    assert.ok((value(settled, 'vole_append_latency_seconds_count') ?? 0) > 0);

    await t.test(
      'promtool check metrics: only the Kubernetes naming warnings',
      { skip: hasPrometheus ? false : 'Debian prometheus (promtool) not installed' },
      () => {
        const check = spawnSync('promtool', ['check', 'metrics'], {
          input: settled,
          encoding: 'utf8',
        });
        assert.ok(check.status === 0 || check.status === 3, `promtool failed: ${check.stderr}`);
        const warnings = `${check.stdout}${check.stderr}`
          .split('\n')
          .filter((l) => l.trim() !== '');
        for (const w of warnings) {
          assert.ok(knownNamingWarnings.has(w.split(' ')[0]!), `unexpected promtool warning: ${w}`);
          assert.ok(w.endsWith('counter metrics should have "_total" suffix'), w);
        }
      },
    );

    await t.test(
      'vole metrics --db at the scraped seq gives the same event-derived metrics',
      async () => {
        // The world may run a few events ahead of the durable log: retry until they meet.
        await eventually(
          'vole metrics --db equal to the live scrape',
          async () => {
            const live = await scrape(url);
            const seq = value(live, 'vole_log_seq');
            const offline = vole('metrics', '--db', db, '--at', String(seq));
            assert.equal(offline.status, 0, offline.stderr);
            const a = samples(live, eventDerived);
            const b = samples(offline.stdout, eventDerived);
            return JSON.stringify(a) === JSON.stringify(b) ? true : undefined;
          },
          20_000,
        );
      },
    );

    await t.test(
      'a real Prometheus server scrapes the agent; PromQL counts the mounted volumes',
      { skip: hasPrometheus ? false : 'Debian prometheus not installed' },
      async () => {
        const port = await freePort();
        const dir = join(base, 'prometheus');
        mkdirSync(join(dir, 'data'), { recursive: true });
        const target = new URL(url).host;
        writeFileSync(
          join(dir, 'prometheus.yml'),
          `global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n  - job_name: vole\n    static_configs: [{targets: ['${target}']}]\n`,
        );
        const server: ChildProcess = spawn(
          'prometheus',
          [
            `--config.file=${join(dir, 'prometheus.yml')}`,
            `--storage.tsdb.path=${join(dir, 'data')}`,
            `--web.listen-address=127.0.0.1:${port}`,
          ],
          { stdio: 'ignore' },
        );
        try {
          const query = encodeURIComponent(
            'sum(volume_manager_total_volumes{state="actual_state_of_world"})',
          );
          const answer = await eventually(
            'Prometheus to answer with the scraped value',
            async () => {
              const res = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${query}`);
              const body = (await res.json()) as {
                data?: { result?: { value: [number, string] }[] };
              };
              return body.data?.result?.[0]?.value[1];
            },
            90_000,
          );
          assert.equal(answer, '4');
        } finally {
          process.kill(server.pid!, 'SIGTERM');
          await new Promise((resolve) =>
            server.exitCode !== null ? resolve(null) : server.once('exit', resolve),
          );
        }
      },
    );

    assert.equal(await agent.stop(), 143);
  },
);
