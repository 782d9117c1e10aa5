/**
 * The API process: listens on HOST:PORT (default 127.0.0.1:3000), drains on SIGINT/SIGTERM (in-flight requests finish, new ones get 503),
 * exits 1 on a start-up error.
 */
import { Client } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import pino from 'pino';
import { PaymentsClient } from '../client';
import { AesGcmPayloadCodec } from '../codec';
import { loadConfig } from '../config';
import { configuredCapabilities } from '../providers/registry';
import { connectionOptions } from '../temporal-connection';
import { buildApi } from './app';

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = pino({
    level: config.LOG_LEVEL,
    base: { component: 'api' },
    // Belt and braces: nothing logs these, but a future `log.info({ req })` must not leak them.
    redact: ['req.headers.authorization', '*.paymentMethod', '*.payment_method'],
  });
  if (config.usingDevelopmentSecrets) logger.warn('using development secrets: never in production');
  // Rust core's client: less of this process's CPU per call than grpc-js (bench/rpc-cost.ts).
  const connection = await NativeConnection.connect(connectionOptions(config));
  const codec = new AesGcmPayloadCodec(config.payloadKeys);
  const client = new Client({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    dataConverter: { payloadCodecs: [codec] },
  });
  const payments = new PaymentsClient(client, {
    taskQueue: config.TASK_QUEUE,
    timings: config.timings,
    retry: config.retry,
    // The same settings the worker builds its adapter from: payments take the lean history shape.
    capabilities: configuredCapabilities(config),
    providers: config.providers,
    defaultProvider: config.defaultProvider,
    orderSingleFlight: config.ORDER_SINGLE_FLIGHT,
    splitPaymentMerchants: config.SPLIT_PAYMENT_MERCHANTS,
  });
  const app = await buildApi({
    client: payments,
    config,
    logger,
    codec: { codec, corsOrigins: config.CODEC_CORS_ORIGINS },
  });
  await app.listen({ port: config.PORT, host: config.HOST });

  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'api draining');
    app
      .close()
      .then(() => connection.close())
      .then(
        () => process.exit(0),
        (err: unknown) => {
          logger.error({ err }, 'api close failed');
          process.exit(1);
        },
      );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
