/**
 * What importing the package's root loads: an agent that imports `vole` gets the volume
 * manager, the controller and the built-in plugins, and no gRPC, no simulator, no cluster
 * code. The count is bounded, so a new import that drags a subsystem in fails here.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join, relative } from 'node:path';
import { test } from 'node:test';

const root = join(import.meta.dirname, '..', '..');

/** The modules importing `entry` loads, by path from the repository's root. */
function loadGraph(entry: string): string[] {
  const out = execFileSync(process.execPath, ['--import', 'tsx', 'scripts/load-graph.mjs', entry], {
    cwd: root,
    encoding: 'utf8',
  });
  return (JSON.parse(out) as string[]).map((path) => relative(root, path));
}

const packageOf = (path: string) => {
  const inside = path.split('node_modules/').pop()!;
  return inside
    .split('/')
    .slice(0, inside.startsWith('@') ? 2 : 1)
    .join('/');
};

test('the root loads no gRPC, no immer, no YAML parser and none of the subsystems agents ask for by sub-path', (t) => {
  const modules = loadGraph('./src/index.ts');
  const own = modules.filter((m) => !m.includes('node_modules/'));
  const packages = new Set(modules.filter((m) => m.includes('node_modules/')).map(packageOf));
  t.diagnostic(
    `root load graph: ${modules.length} modules, ${own.length} of vole's; packages: ${[...packages].sort().join(' ')}`,
  );
  for (const unwanted of ['@grpc/grpc-js', '@grpc/proto-loader', 'immer', 'yaml', 'etcd3'])
    assert.ok(!packages.has(unwanted), `importing vole loads ${unwanted}`);
  for (const folder of ['src/csi/', 'src/sim/', 'src/cluster/', 'src/kube/', 'src/cli/'])
    assert.deepEqual(
      own.filter((m) => m.startsWith(folder)),
      [],
      `importing vole loads ${folder}: move the import behind a sub-path entry (src/entry/)`,
    );
  // 379 modules (146 of vole's) when this bound was set; it was 591 with gRPC in the root.
  assert.ok(modules.length <= 400, `the root loads ${modules.length} modules (bound 400)`);
});

test('vole/csi loads gRPC: the load graph sees a sub-path entry’s packages', (t) => {
  const modules = loadGraph('./src/entry/csi.ts');
  t.diagnostic(`vole/csi load graph: ${modules.length} modules`);
  assert.ok(modules.some((m) => packageOf(m) === '@grpc/grpc-js'));
});
