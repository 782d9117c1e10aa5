/**
 * `npm run webhooks -- <command>`: the operator's tool for webhooks to merchants (docs/operations.md#webhooks-to-
 * merchants). It reads the same environment as the stack (DATABASE_URL, TEMPORAL_ADDRESS, TASK_QUEUE, PAYLOAD_KEYS).
 *
 *   status [--merchant <id>]                 every merchant's backlog, or one merchant's events by status
 *   retry-now --merchant <id>                its pending events due now (its endpoint is back), and a round started
 *   redeliver --merchant <id> [--payment <key>] [--since <ISO time>] [--status failed,discarded,delivered]
 *                                            queues settled events again (default: the failed and discarded ones)
 */
import { Client, Connection } from '@temporalio/client';
import pino from 'pino';
import { encryptingDataConverter, AesGcmPayloadCodec } from '../src/codec';
import { loadConfig } from '../src/config';
import { openDatabase } from '../src/db';
import { MerchantEventOutbox, type RedeliveryFilter, wakeMerchantDeliveries } from '../src/merchant-webhooks';
import { clientInterceptors } from '../src/grpc-close-guard';
import { connectionOptions } from '../src/temporal-connection';

const usage =
  'usage: npm run webhooks -- status [--merchant <id>] | retry-now --merchant <id> | ' +
  'redeliver --merchant <id> [--payment <key>] [--since <ISO time>] [--status failed,discarded,delivered]';

/** `--name value` pairs. */
function flags(args: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < args.length; i += 2) {
    const name = args[i];
    const value = args[i + 1];
    if (!name?.startsWith('--') || value === undefined) throw new Error(usage);
    out[name.slice(2)] = value;
  }
  return out;
}

async function main(): Promise<void> {
  const [command, ...rest] = process.argv.slice(2);
  const opts = flags(rest);
  const config = loadConfig();
  if (config.DATABASE_URL === undefined) throw new Error('DATABASE_URL is not set (npm start prints its PostgreSQL)');
  const db = await openDatabase({ url: config.DATABASE_URL, poolSize: 2 }, pino({ level: 'silent' }));
  const outbox = new MerchantEventOutbox(db.pool);
  const merchant = opts.merchant;
  /** Starts a round of the merchant's delivery workflow (with the stack's codec: the workers decode its input). */
  const wake = async (merchantId: string) => {
    const connection = await Connection.connect({ ...connectionOptions(config), interceptors: clientInterceptors() });
    try {
      const codec = new AesGcmPayloadCodec(config.payloadKeys);
      const client = new Client({
        connection,
        namespace: config.TEMPORAL_NAMESPACE,
        dataConverter: encryptingDataConverter(codec),
      });
      await wakeMerchantDeliveries(client, merchantId, config.TASK_QUEUE);
    } finally {
      await connection.close();
    }
  };
  try {
    if (command === 'status') {
      if (merchant === undefined) console.table(await outbox.backlog());
      else console.table(await outbox.summary(merchant));
    } else if (command === 'retry-now' && merchant !== undefined) {
      const due = await outbox.dueNow(merchant);
      await wake(merchant);
      console.log(`${due} pending event(s) of ${merchant} due now; a delivery round was started`);
    } else if (command === 'redeliver' && merchant !== undefined) {
      const filter: RedeliveryFilter = {
        merchantId: merchant,
        ...(opts.payment === undefined ? {} : { paymentKey: opts.payment }),
        ...(opts.since === undefined ? {} : { since: new Date(opts.since) }),
        ...(opts.status === undefined
          ? {}
          : { statuses: opts.status.split(',') as NonNullable<RedeliveryFilter['statuses']> }),
      };
      const queued = await outbox.redeliver(filter);
      if (queued > 0) await wake(merchant);
      console.log(`${queued} event(s) of ${merchant} queued again, each with a fresh retry window`);
    } else {
      throw new Error(usage);
    }
  } finally {
    await db.close();
  }
}

main().catch((err: unknown) => {
  console.error(`[webhooks] ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
