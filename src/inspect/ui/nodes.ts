/**
 * The controller's side panel: for a controller log, each node's health, what it reports
 * in use and what the controller publishes as volumesAttached, then the reports raised
 * (Multi-Attach refusals). Hidden for a kubelet log.
 */
import type { WorldPayload } from '../protocol.js';
import { clear, h } from './dom.js';

type NodeView = NonNullable<WorldPayload['view']['nodes']>[number];

function nodeRow(node: NodeView) {
  const health = `${node.exists ? '' : 'deleted · '}${node.ready ? 'ready' : 'not ready'}${node.outOfService ? ' · out of service' : ''}`;
  const attached = node.volumesAttached.map((v) => v.name);
  return h(
    'li',
    { class: 'node', 'data-node': node.node },
    h('span', { class: 'volume' }, node.node),
    h('span', { class: 'sub' }, health),
    h(
      'span',
      { class: 'sub', 'data-testid': 'volumes-attached' },
      `volumesAttached [${attached.join(' ')}]`,
    ),
    h('span', { class: 'sub' }, `volumesInUse [${node.volumesInUse.join(' ')}]`),
  );
}

export function renderNodes(container: HTMLElement, world: WorldPayload | undefined): void {
  const nodes = world?.view.nodes;
  container.hidden = nodes === undefined;
  if (world === undefined || nodes === undefined) return clear(container);
  const reports = world.reports.slice(-20).reverse();
  clear(
    container,
    h('div', { class: 'counts' }, `${nodes.length} nodes`),
    h('ul', { class: 'nodes', 'data-testid': 'nodes' }, ...nodes.map(nodeRow)),
    h('div', { class: 'counts' }, `${world.reports.length} reports`),
    h(
      'ul',
      { class: 'reports', 'data-testid': 'reports' },
      ...reports.map((r) =>
        h(
          'li',
          { class: 'report' },
          h('span', { class: 'sub' }, `#${r.seq} ${r.reason}`),
          r.message,
        ),
      ),
    ),
  );
}
