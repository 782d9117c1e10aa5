import {
  condition,
  continueAsNew,
  log,
  proxyActivities,
  setHandler,
  workflowInfo,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { MerchantWebhookActivities } from '../merchant-webhooks';
import { type DeliveryRound, type MerchantWebhooksInput, merchantWebhooksWakeSignal } from '../domain/merchant-events';
import { messageOf } from './failures';

/**
 * One delivery round: up to the round's budget (20 s by default) plus one attempt's bound, heartbeating; a round whose
 * worker died is retried (its claimed events wait for their lease), within ten minutes.
 */
const deliveryRound = {
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '10 seconds',
  scheduleToCloseTimeout: '10 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', backoffCoefficient: 2 },
  summary: 'deliver the merchant’s due webhook events',
} satisfies ActivityOptions;

const { deliverDueMerchantEvents } = proxyActivities<MerchantWebhookActivities>(deliveryRound);

/** After a round that could not run (the database away), the next one is tried this much later. */
const afterFailedRoundMs = 30_000;
/** Rounds per run: the history stays short (a few events per round) whatever the merchant's volume. */
const roundsPerRun = 200;

/**
 * The webhook deliveries of one merchant (`merchant-webhooks:<merchantId>`, on the webhook task queue): runs delivery
 * rounds while events are due, sleeps until the next retry is due, and idles without a timer when nothing is pending,
 * until a payment's handoff wakes it (signal-with-start). One round at a time: a merchant holds one activity slot and
 * at most its concurrency in POSTs, so a slow or dead endpoint never delays another merchant's events. It never ends
 * on its own; it continues as new every few hundred rounds.
 */
export async function merchantWebhooksWorkflow(input: MerchantWebhooksInput): Promise<void> {
  let woken = false;
  setHandler(merchantWebhooksWakeSignal, () => {
    woken = true;
  });
  for (let round = 1; ; round += 1) {
    // A wake that arrives while the round runs starts another round: its event may have been queued too late for it.
    woken = false;
    let result: DeliveryRound;
    try {
      result = await deliverDueMerchantEvents(input);
    } catch (err) {
      log.warn('merchant webhook delivery round failed; trying again later', { reason: messageOf(err) });
      result = { delivered: 0, failed: 0, more: false, nextDueInMs: afterFailedRoundMs };
    }
    if (result.more) continue;
    // Each run starts with a round, so a wake lost with the old run costs nothing.
    if (round >= roundsPerRun || workflowInfo().continueAsNewSuggested)
      await continueAsNew<typeof merchantWebhooksWorkflow>(input);
    if (result.nextDueInMs === undefined) await condition(() => woken);
    else await condition(() => woken, Math.max(result.nextDueInMs, 1));
  }
}
