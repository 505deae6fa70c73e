/**
 * The storage panel: the StorageClasses of the log's world, each claim's standing (state,
 * bound PV, last error, next retry) and each PersistentVolume (phase, capacity, reclaim
 * policy, node affinity), at the moment shown: a line of counts that opens to the tables.
 * Hidden when the world holds none of them.
 */
import type { WorldPayload } from '../protocol.js';
import { clear, formatTime, h } from './dom.js';
import { app } from './state.js';

type Storage = WorldPayload['storage'];

function bytes(n: number | null): string {
  if (n === null) return '';
  for (const [unit, size] of [
    ['Gi', 2 ** 30],
    ['Mi', 2 ** 20],
    ['Ki', 2 ** 10],
  ] as const)
    if (n >= size && n % size === 0) return `${n / size}${unit}`;
  return `${n} B`;
}

function table(testid: string, head: string[], rows: HTMLTableRowElement[]) {
  return h(
    'table',
    { class: 'storage', 'data-testid': testid },
    h('thead', {}, h('tr', {}, ...head.map((c) => h('th', {}, c)))),
    h('tbody', {}, ...rows),
  );
}

const cell = (text: string, cls = '') => h('td', cls === '' ? {} : { class: cls }, text);

function classRows(storage: Storage) {
  return storage.classes.map((c) =>
    h(
      'tr',
      { 'data-class': c.name },
      cell(`${c.name}${c.isDefault ? ' (default)' : ''}`),
      cell(c.provisioner),
      cell(c.reclaimPolicy),
      cell(c.volumeBindingMode),
      cell(c.allowVolumeExpansion ? 'yes' : 'no'),
    ),
  );
}

function claimRows(storage: Storage) {
  const origin = app.meta?.firstTsMs ?? 0;
  return storage.claims.map((c) =>
    h(
      'tr',
      { 'data-claim': c.claim, class: c.lastError === null ? '' : 'failing' },
      cell(c.claim),
      cell(c.storageClassName),
      cell(`${c.state}${c.running ? ' (running)' : ''}`, 'state'),
      cell(c.volume ?? ''),
      cell(c.lastError ?? '', 'error'),
      cell(c.nextRetryAtMs === null ? '' : formatTime(c.nextRetryAtMs, origin)),
    ),
  );
}

function pvRows(storage: Storage) {
  return storage.pvs.map((pv) =>
    h(
      'tr',
      { 'data-pv': pv.name },
      cell(pv.name),
      cell(pv.phase, 'state'),
      cell(pv.claim ?? ''),
      cell(bytes(pv.capacityBytes)),
      cell(pv.reclaimPolicy ?? ''),
      cell(pv.nodeAffinity ?? ''),
    ),
  );
}

export function renderStorage(container: HTMLElement, world: WorldPayload | undefined): void {
  const storage = world?.storage;
  const empty =
    storage === undefined ||
    storage.classes.length + storage.claims.length + storage.pvs.length === 0;
  container.hidden = empty;
  if (empty) return clear(container);
  const classes = ['class', 'provisioner', 'reclaim', 'binding mode', 'expands'];
  const claims = ['claim', 'class', 'state', 'volume', 'last error', 'next retry'];
  const pvs = ['PV', 'phase', 'claim', 'capacity', 'reclaim', 'node affinity'];
  const counts = [
    `${storage.classes.length} storage classes`,
    `${storage.claims.length} claims`,
    `${storage.pvs.length} persistent volumes`,
  ];
  clear(
    container,
    h('summary', { class: 'counts', 'data-testid': 'storage-summary' }, counts.join(' · ')),
    h('div', { class: 'counts' }, `${storage.classes.length} storage classes`),
    table('storage-classes', classes, classRows(storage)),
    h('div', { class: 'counts' }, `${storage.claims.length} claims`),
    table('storage-claims', claims, claimRows(storage)),
    h('div', { class: 'counts' }, `${storage.pvs.length} persistent volumes`),
    table('storage-pvs', pvs, pvRows(storage)),
  );
}
