/** `npm run build` step: bundles the inspector's page into dist/inspector/ (see assets.ts). */
import { relative } from 'node:path';
import { packageRoot, writeBundle } from './assets.js';

const files = await writeBundle();
process.stdout.write(`inspector page: ${files.map((f) => relative(packageRoot, f)).join(', ')}\n`);
