/**
 * The breaker store every worker process shares: one Redis, per provider a state hash, a sliding-window hash and a
 * cool-down key, changed only by two Lua scripts. A script runs atomically on the server, so "is the breaker half-open
 * and is its probe slot free? then take it" is one step for all processes: exactly one probe goes out.
 *
 * Times are the caller's clock (`now` is an argument, not Redis `TIME`): tests inject a clock, and the workers'
 * clocks agree to well under the breaker's periods. Redis key expiry is only housekeeping.
 */
import { createHash, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { bucketMsOf } from './counting';
import {
  type BreakerBlock,
  type BreakerDecision,
  type BreakerOptions,
  type BreakerOutcome,
  type BreakerReport,
  type BreakerState,
  type BreakerStateKind,
  type InspectableBreaker,
  type ResolvedBreakerOptions,
  outcomeClass,
  refusal,
  reportProbeOutcome,
  reportProbeReleased,
  reportProbeTaken,
  resolveBreakerOptions,
} from './breaker';

// KEYS: state, notBefore. ARGV: now, probeTimeoutMs, token.
// Returns {allowed (0/1), waitMs, reason or probe token ('' when closed), the state a probe was taken in}.
const ACQUIRE = `
local now = tonumber(ARGV[1])
local notBefore = tonumber(redis.call('GET', KEYS[2]) or '0')
if now < notBefore then return {0, notBefore - now, 'cool_down'} end
local s = redis.call('HMGET', KEYS[1], 'state', 'openUntil', 'probeUntil')
local state = s[1] or 'closed'
if state == 'closed' then return {1, 0, '', state} end
if state == 'open' and now < tonumber(s[2]) then return {0, tonumber(s[2]) - now, 'open', state} end
if state == 'half_open' and now < tonumber(s[3]) then return {0, tonumber(s[3]) - now, 'probe_in_flight', state} end
-- Open period over, or the last probe never reported back: this caller is the one probe.
redis.call('HSET', KEYS[1], 'state', 'half_open', 'probe', ARGV[3], 'probeUntil', now + tonumber(ARGV[2]))
return {1, 0, ARGV[3], state}
`;

// KEYS: state, window, notBefore.
// ARGV: now, class (healthy|unhealthy|ignored), kind (read|write), probe token or '', coolDownMs,
//       consecutiveFailures, windowMs (0: no window), bucketMs, failureRate, minimumCalls, openMs.
// Returns {the state before, the state after, the new "not before" when this record moved it (else 0), 1 when a
// half-open probe that never reached the provider gave its slot back (else 0)}.
const RECORD = `
local now = tonumber(ARGV[1])
local class, kind, probe = ARGV[2], ARGV[3], ARGV[4]
local coolDownMs = tonumber(ARGV[5])
local coolDownUntil = 0
if coolDownMs > 0 then
  local notBefore = tonumber(redis.call('GET', KEYS[3]) or '0')
  if now + coolDownMs > notBefore then
    coolDownUntil = now + coolDownMs
    redis.call('SET', KEYS[3], coolDownUntil, 'PX', coolDownMs + 60000)
  end
end
local state = redis.call('HGET', KEYS[1], 'state') or 'closed'
if class == 'ignored' then return {state, state, coolDownUntil} end

-- The counting strategy (counting.ts): does this outcome open the breaker?
local function trips(healthy)
  local consecutive = 0
  if not healthy then consecutive = tonumber(redis.call('HGET', KEYS[1], 'consecutive') or '0') + 1 end
  redis.call('HSET', KEYS[1], 'consecutive', consecutive)
  local windowMs = tonumber(ARGV[7])
  local calls, failures = 0, 0
  if windowMs > 0 then
    local bucketMs = tonumber(ARGV[8])
    local start = now - (now % bucketMs)
    redis.call('HINCRBY', KEYS[2], 'c:' .. start, 1)
    if not healthy then redis.call('HINCRBY', KEYS[2], 'f:' .. start, 1) end
    redis.call('PEXPIRE', KEYS[2], windowMs + bucketMs)
    local fields = redis.call('HGETALL', KEYS[2])
    for i = 1, #fields, 2 do
      local at = tonumber(string.sub(fields[i], 3))
      if at <= now - windowMs then redis.call('HDEL', KEYS[2], fields[i])
      elseif string.sub(fields[i], 1, 1) == 'c' then calls = calls + tonumber(fields[i + 1])
      else failures = failures + tonumber(fields[i + 1]) end
    end
  end
  if healthy then return false end
  return consecutive >= tonumber(ARGV[6])
    or (windowMs > 0 and calls >= tonumber(ARGV[10]) and failures >= tonumber(ARGV[9]) * calls)
end

-- The state machine.
local function open()
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[1], 'state', 'open', 'openUntil', now + tonumber(ARGV[11]), 'consecutive', 0,
    'probe', '', 'probeUntil', 0)
  return {state, 'open', coolDownUntil}
end
if state == 'half_open' then
  -- Only the probe decides: not a read, not a late call that started before the breaker opened.
  if probe == '' or probe ~= redis.call('HGET', KEYS[1], 'probe') then return {state, state, coolDownUntil} end
  -- The probe's write never reached the provider: nothing was tested, the next write is the probe.
  if kind == 'read' then
    redis.call('HSET', KEYS[1], 'probe', '', 'probeUntil', 0)
    return {state, state, coolDownUntil, 1}
  end
  if class == 'healthy' then
    redis.call('DEL', KEYS[1], KEYS[2])
    return {state, 'closed', coolDownUntil}
  end
  return open()
end
if state == 'open' then return {state, state, coolDownUntil} end
if class == 'healthy' and kind == 'read' then return {state, state, coolDownUntil} end
if trips(class == 'healthy') then return open() end
return {state, 'closed', coolDownUntil}
`;

const sha1 = (s: string) => createHash('sha1').update(s).digest('hex');

export interface RedisBreakerOptions extends BreakerOptions {
  /** Prefix of every key. Default `pw:breaker:`. */
  readonly keyPrefix?: string;
}

/** A {@link CircuitBreaker} whose state lives in Redis, shared by every worker that points at the same prefix. */
export class RedisCircuitBreaker implements InspectableBreaker {
  readonly #o: ResolvedBreakerOptions;
  readonly #prefix: string;

  constructor(
    readonly redis: Redis,
    options: RedisBreakerOptions = {},
  ) {
    this.#o = resolveBreakerOptions(options);
    this.#prefix = options.keyPrefix ?? 'pw:breaker:';
  }

  /** Whether the connection is up (commands would be refused at once otherwise: no offline queue). */
  get available(): boolean {
    return this.redis.status === 'ready';
  }

  // The braces are a cluster hash tag: one provider's keys live on one slot, as a script needs.
  #keys(provider: string) {
    const base = `${this.#prefix}{${provider}}`;
    return { state: `${base}:state`, window: `${base}:window`, notBefore: `${base}:not-before` };
  }

  async #run(script: string, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    try {
      return await this.redis.evalsha(sha1(script), keys.length, ...keys, ...args);
    } catch (err) {
      // A fresh (or restarted) Redis does not know the script yet; Redis says so only in the error text.
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return this.redis.eval(script, keys.length, ...keys, ...args);
    }
  }

  async acquire(provider: string): Promise<BreakerDecision> {
    const k = this.#keys(provider);
    const token = randomUUID();
    const now = Math.floor(this.#o.now());
    const reply = await this.#run(ACQUIRE, [k.state, k.notBefore], [now, this.#o.probeTimeoutMs, token]);
    const [allowed, waitMs, tag, from] = reply as [number, number, string, BreakerStateKind];
    if (allowed === 1) {
      if (tag === '') return { allowed: true };
      reportProbeTaken(this.#o.notify, provider, from, now);
      return { allowed: true, probe: tag };
    }
    return refusal(this.#o, provider, now, waitMs, tag as BreakerBlock);
  }

  async record(provider: string, outcome: BreakerOutcome, report: BreakerReport = {}): Promise<void> {
    const k = this.#keys(provider);
    const { counting, notify } = this.#o;
    const w = counting.window;
    const now = Math.floor(this.#o.now());
    const coolDownMs = Math.max(0, Math.ceil(report.coolDownMs ?? 0));
    const reply = await this.#run(
      RECORD,
      [k.state, k.window, k.notBefore],
      [
        now,
        outcomeClass(outcome),
        report.kind ?? 'write',
        report.probe ?? '',
        coolDownMs,
        counting.consecutiveFailures,
        w?.durationMs ?? 0,
        w ? bucketMsOf(w) : 1,
        w?.failureRate ?? 1,
        w?.minimumCalls ?? 0,
        this.#o.openMs,
      ],
    );
    const [from, to, coolDownUntil, released] = reply as [BreakerStateKind, BreakerStateKind, number, number?];
    if (coolDownUntil > 0) notify.onCoolDown({ provider, coolDownMs, untilMs: coolDownUntil, atMs: now });
    if (released === 1) reportProbeReleased(notify, provider, now);
    else if (from === 'half_open' && to !== 'half_open') reportProbeOutcome(notify, provider, to === 'closed', now);
    else if (from !== to) notify.onTransition({ provider, from, to, atMs: now });
  }

  async state(provider: string): Promise<BreakerState> {
    const [state, consecutive, openUntil, probeUntil] = await this.redis.hmget(
      this.#keys(provider).state,
      'state',
      'consecutive',
      'openUntil',
      'probeUntil',
    );
    if (state === 'open') return { kind: 'open', until: Number(openUntil) };
    if (state === 'half_open') return { kind: 'half_open', probeUntil: Number(probeUntil) };
    return { kind: 'closed', failures: Number(consecutive ?? 0) };
  }

  /** Epoch ms before which no write goes to `provider` (0 when there is no cool-down). */
  async coolDownUntil(provider: string): Promise<number> {
    return Number((await this.redis.get(this.#keys(provider).notBefore)) ?? 0);
  }
}

/**
 * An ioredis connection for the breaker: commands fail at once while disconnected (no offline queue, no per-command
 * retries), so a worker falls back to its in-process store instead of waiting; it reconnects in the background.
 */
export function connectBreakerRedis(url: string, onError: (err: Error) => void = () => undefined): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: 1_000,
    connectTimeout: 2_000,
    retryStrategy: (times) => Math.min(100 * times, 2_000),
  });
  // Without a listener ioredis prints every reconnect failure; the fallback logs the transitions that matter.
  redis.on('error', onError);
  return redis;
}

/** Resolves true once the connection is ready, false after `timeoutMs` (the caller then starts on the fallback). */
export function redisReady(redis: Redis, timeoutMs: number): Promise<boolean> {
  if (redis.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      resolve(ok);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), timeoutMs);
    redis.on('ready', onReady);
  });
}

/** Closes the connection and stops reconnecting: QUIT when it is up (a clean close), else drop it. */
export async function closeBreakerRedis(redis: Redis): Promise<void> {
  if (redis.status === 'end') return;
  if (redis.status === 'ready') await redis.quit().catch(() => redis.disconnect());
  else redis.disconnect();
}
