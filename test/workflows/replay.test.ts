/**
 * Replays every recorded history in test/histories against the current workflow code. A change that would break
 * running payments (non-determinism: a reordered activity, a removed timer, a renamed handler) fails here.
 * Record again deliberately with `RECORD_HISTORIES=1 npx jest test/workflows` only when old runs no longer exist.
 * The `*-by-updates` histories were recorded when captures, refunds and verdicts were updates: no test sends those
 * any more (production sends signals), so these files are what keeps the update handlers kept for older runs replaying.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { AesGcmPayloadCodec, newPayloadKey, parsePayloadKeys } from '../../src/codec';
import { workflowBundle } from '../helpers/payments';
import { HISTORIES_DIR } from '../helpers/workflows';

const files = readdirSync(HISTORIES_DIR)
  .filter((f) => f.endsWith('.json'))
  .sort();

it('has the recorded scenarios to replay', () => {
  // Charge: succeeded, lost response, rejected, unknown found, unknown by webhook, needs review; capture/refund; expiry.
  expect(files.length).toBeGreaterThanOrEqual(10);
});

const replayAll = async (dataConverter?: { payloadCodecs: AesGcmPayloadCodec[] }) => {
  const histories = files.map((file) => ({
    workflowId: file,
    history: temporal.api.history.v1.History.fromObject(
      JSON.parse(readFileSync(path.join(HISTORIES_DIR, file), 'utf8')),
    ),
  }));
  const failures: string[] = [];
  let replayed = 0;
  const options = { workflowBundle: await workflowBundle(), ...(dataConverter ? { dataConverter } : {}) };
  for await (const result of Worker.runReplayHistories(options, histories)) {
    replayed += 1;
    if (result.error) failures.push(`${result.workflowId}: ${result.error.message}`);
  }
  return { failures, replayed };
};

/**
 * Replaying every history (73 files) takes ~15 s alone and up to ~110 s on a CI machine running two test files at
 * once: the default 60 s timed the second pass out there (nothing failed to replay).
 */
const REPLAY_ALL_TIMEOUT_MS = 300_000;

it(
  'replays every recorded history without non-determinism',
  async () => {
    const { failures, replayed } = await replayAll();
    expect(failures).toEqual([]);
    expect(replayed).toBe(files.length);
  },
  REPLAY_ALL_TIMEOUT_MS,
);

it(
  'replays them on a worker with payload encryption too (recorded before it: the codec passes them through)',
  async () => {
    const { failures, replayed } = await replayAll({
      payloadCodecs: [new AesGcmPayloadCodec(parsePayloadKeys(newPayloadKey('replay')))],
    });
    expect(failures).toEqual([]);
    expect(replayed).toBe(files.length);
  },
  REPLAY_ALL_TIMEOUT_MS,
);
