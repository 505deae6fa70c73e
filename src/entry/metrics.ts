/**
 * `vole/metrics`: the Prometheus endpoint. `vm.metrics` and `cm.metrics` are each a
 * VoleMetrics with a prom-client Registry of its own; serveMetrics serves one (or several,
 * merged) over HTTP, as `vole run --metrics-address` does.
 *
 * @packageDocumentation
 */
export {
  parseMetricsAddress,
  serveMetrics,
  VoleMetrics,
  type MetricsServer,
  type VoleMetricsOptions,
  type WorldSource,
} from '../metrics/index.js';
