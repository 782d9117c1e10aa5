/**
 * A jest setup file for bench/suite-cpu.ts: appends `<cpu ms> <test file>` for each test file to the file named by
 * SUITE_CPU_FILE: the jest worker's CPU (all its threads) from the file's first line to its first afterAll hook (this
 * one runs before the file's own: its teardown is left out). jest runs one file at a time in a worker, so the
 * difference is that file's; processes it spawns are not in it.
 */
import { appendFileSync } from 'node:fs';
import path from 'node:path';
import { SUITE_CPU_FILE_ENV } from './suite-cpu';

const started = process.cpuUsage();
const out = process.env[SUITE_CPU_FILE_ENV];

afterAll(() => {
  if (!out) return;
  const used = process.cpuUsage(started);
  const file = path.relative(process.cwd(), expect.getState().testPath ?? '?');
  appendFileSync(out, `${((used.user + used.system) / 1000).toFixed(0)} ${file}\n`);
});
