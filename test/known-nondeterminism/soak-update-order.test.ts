/**
 * A known nondeterminism of the Temporal TypeScript SDK (1.24.0, the newest on npm here) that the 10,000-payment chaos
 * soak found: 17 of 10,000 charges whose history was replayed (a worker SIGKILLed, or its cache evicted) are stuck with
 * `[TMPRL1100] Nondeterminism error: Update machine does not handle this event: HistoryEvent(UpsertWorkflowSearchAttributes)`
 * (16) or `UpdateMachine in state AcceptCommandCreated says the transition is invalid` (1).
 *
 * Each history here was written by this project's workflow code as it was during the soak (commit fafa356), which
 * then failed to replay it on the live workers, as today's code does:
 * one workflow task completed an activity or a child's result (an upsert, a timer, the submit update's completion)
 * AND accepted a capture/refund update that arrived while the task was in flight, in that order. Replayed, the SDK
 * hands the workflow the update before the result, so the workflow's first command is the update's acceptance where
 * history has the upsert. The workflow cannot order the SDK's acceptance message; the payments are durable but stuck
 * until the SDK replays them as it ran them.
 *
 * This test pins the reproduction: it fails when replay of these histories stops failing (an SDK upgrade that fixes
 * it, or a workflow change): then move them to test/histories, where every history must replay.
 *
 * No new payment can record such a history: only a payment's first workflow task accepts an update; captures, refunds,
 * repeats and operators' verdicts reach a running payment as signals (test/scenarios/mid-life-requests.test.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { AesGcmPayloadCodec } from '../../src/codec';
import { loadConfig } from '../../src/config';
import { workflowBundle } from '../helpers/payments';

const files = readdirSync(__dirname)
  .filter((f) => f.endsWith('.json'))
  .sort();

it("the 10,000-payment soak's stuck charges still replay with the SDK's update-ordering nondeterminism", async () => {
  expect(files).toHaveLength(17);
  // The soak's cluster ran with the development payload key (payloads in these histories are ciphertext).
  const codec = new AesGcmPayloadCodec(loadConfig({}).payloadKeys);
  const histories = files.map((file) => ({
    workflowId: file,
    history: temporal.api.history.v1.History.fromObject(JSON.parse(readFileSync(path.join(__dirname, file), 'utf8'))),
  }));
  const errors: string[] = [];
  for await (const result of Worker.runReplayHistories(
    { workflowBundle: await workflowBundle(), dataConverter: { payloadCodecs: [codec] } },
    histories,
  )) {
    errors.push(`${result.workflowId}: ${result.error?.message ?? 'replayed'}`);
  }
  expect(errors).toHaveLength(17);
  // 16: the update machine meets the result's upsert; 1: it meets another update's completion (same reordering).
  for (const e of errors) {
    expect(e).toMatch(/Update machine does not handle this event|UpdateMachine in state AcceptCommandCreated/);
  }
});
