/**
 * The partition harness itself (test/support/netns.ts): hosts in namespaces of their own
 * reach each other over the test's bridge; a cut link drops what it carries (and only
 * that link), a delayed one adds its delay, a lossy one loses some; healing restores
 * each; nothing of the lab is left after destroy.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { after, before, test } from 'node:test';
import { NetLab, netemAvailable, netnsSkipReason } from '../support/netns.js';

const skip = netnsSkipReason();
let lab: NetLab;
let server: ChildProcess | undefined;
const port = 7070;

/** `sizeBytes` asked of b's server from `from`: milliseconds, or null when not in `timeoutMs`. */
function roundTripMs(from: string, sizeBytes = 1, timeoutMs = 1000): number | null {
  const [cmd, ...rest] = lab.enter(from);
  const script = `const s=require('net').connect(${port},'${lab.address('b')}');const t=Date.now();
let n=0;s.write('${sizeBytes}\\n');s.setTimeout(${timeoutMs},()=>process.exit(1));s.on('error',()=>process.exit(1));
s.on('data',(d)=>{n+=d.length;if(n>=${sizeBytes}){console.log(Date.now()-t);process.exit(0)}})`;
  const result = spawnSync(cmd!, [...rest, process.execPath, '-e', script], { encoding: 'utf8' });
  return result.status === 0 ? Number(result.stdout.trim()) : null;
}

before(async () => {
  if (skip !== false) return;
  lab = NetLab.create({ hosts: ['a', 'b', 'c'] });
  const [cmd, ...rest] = lab.enter('b');
  const script = `require('net').createServer(s=>s.once('data',d=>s.end(Buffer.alloc(Number(String(d).trim()),120)))).listen(${port},'${lab.address('b')}',()=>console.log('up'))`;
  server = spawn(cmd!, [...rest, process.execPath, '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise((resolve) => server!.stdout!.once('data', resolve));
});

after(() => {
  if (server?.pid !== undefined && server.exitCode === null) process.kill(server.pid, 'SIGKILL');
  lab?.destroy();
});

test(
  'netns: hosts reach each other over the bridge; cut, slow, delay, loss and heal act per link',
  { skip },
  (t) => {
    assert.notEqual(roundTripMs('a'), null, 'a reaches b');
    lab.cut('a', 'b');
    assert.equal(roundTripMs('a'), null, 'a cut from b');
    assert.notEqual(roundTripMs('c'), null, 'c still reaches b');
    lab.heal('a', 'b');
    assert.notEqual(roundTripMs('a'), null, 'healed');
    // A link capped at 64 kbit/s: 24 KiB from b take about 3 s instead of a few ms.
    lab.link('a', 'b', { kind: 'slow', rateKbit: 64 });
    const slow = roundTripMs('a', 24_576, 8000);
    assert.ok(slow !== null && slow >= 1500, `a slowed link: ${slow} ms`);
    const fast = roundTripMs('c', 24_576);
    assert.ok(fast !== null && fast < 500, `the other link is not slowed: ${fast} ms`);
    if (netemAvailable()) {
      lab.link('a', 'b', { kind: 'delay', delayMs: 150, jitterMs: 0 });
      const late = roundTripMs('a');
      assert.ok(late !== null && late >= 300, `a delayed link: ${late} ms`);
    } else t.diagnostic('no sch_netem in this kernel: the delay impairment is not tested');
    lab.link('a', 'b', { kind: 'loss', percent: 100 });
    assert.equal(roundTripMs('a'), null, 'a link losing everything');
    lab.healAll();
    assert.deepEqual(lab.describe(), []);
    assert.notEqual(roundTripMs('a'), null, 'every link healed');
  },
);

test('netns: destroy removes every namespace of the lab', { skip }, () => {
  const other = NetLab.create({ hosts: ['x', 'y'] });
  assert.equal(other.leftovers().length, 0 + 3, 'the bridge and two hosts while it lives');
  other.destroy();
  assert.deepEqual(other.leftovers(), []);
});
