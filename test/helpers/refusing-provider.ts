/**
 * A provider whose port refuses connections: every attempt at it provably never left the machine (the failover tests'
 * `down`).
 */
import type { Logger } from '../../src/providers/logging';
import { type RestProvider, createProvider, simulatorCapabilities } from '../../src/providers';
import { refusedPort } from './net';

/** A simulator-shaped REST provider named `name` pointed at a closed port on 127.0.0.1. */
export const refusingProvider = async (name: string, logger: Logger): Promise<RestProvider> =>
  createProvider(
    {
      name,
      baseUrl: `http://127.0.0.1:${await refusedPort()}`,
      apiKey: `sk_test_${name}`,
      capabilities: simulatorCapabilities(),
      connectTimeoutMs: 500,
      totalTimeoutMs: 1_500,
    },
    logger,
  );
