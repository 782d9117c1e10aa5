import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';
import type { Json } from './schemas';

/** A response before it is written: status, JSON body and extra headers. */
export interface Reply {
  status: number;
  body: Json;
  headers?: Record<string, string>;
}

/** Provider error body types, as Stripe names them. */
export type ErrorType =
  'invalid_request_error' | 'card_error' | 'idempotency_error' | 'authentication_error' | 'api_error';

/** A reply with the provider's error envelope `{ error: { type, code, message, param? } }`. */
export function errorReply(
  status: number,
  type: ErrorType,
  code: string,
  message: string,
  extra: Record<string, string> = {},
): Reply {
  return { status, body: { error: { type, code, message, ...extra } } };
}

/** The value at a path of parsed JSON, undefined when any step is missing. */
function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let v = input;
  for (const step of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<PropertyKey, unknown>)[step];
  }
  return v;
}

/** A 400 for the first schema issue, naming the offending parameter. */
export function validationReply(error: z.ZodError, input: unknown): Reply {
  const issue = error.issues[0];
  const param = issue?.path.map(String).join('.') ?? '';
  const missing = issue !== undefined && issue.path.length > 0 && valueAt(input, issue.path) === undefined;
  return errorReply(
    400,
    'invalid_request_error',
    missing ? 'parameter_missing' : 'parameter_invalid',
    issue ? `${param || 'body'}: ${issue.message}` : 'invalid request',
    { param },
  );
}

/** Thrown while reading a request that cannot be answered normally (too large, bad JSON). */
export class BadRequest extends Error {
  constructor(readonly reply: Reply) {
    super(String((reply.body as { error?: { message?: string } }).error?.message ?? 'bad request'));
    this.name = 'BadRequest';
  }
}

const MAX_BODY_BYTES = 1024 * 1024;

/** Reads and parses a JSON body; an empty body is `{}`, as for a bodiless POST. */
export async function readJson(req: IncomingMessage): Promise<Json> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > MAX_BODY_BYTES) {
      throw new BadRequest(errorReply(413, 'invalid_request_error', 'body_too_large', 'body over 1 MiB'));
    }
    chunks.push(buf);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return {};
  try {
    return JSON.parse(text) as Json;
  } catch {
    throw new BadRequest(errorReply(400, 'invalid_request_error', 'body_invalid_json', 'body is not valid JSON'));
  }
}

/** Writes a reply as JSON. */
export function send(res: ServerResponse, reply: Reply): void {
  const text = JSON.stringify(reply.body);
  res.writeHead(reply.status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    ...reply.headers,
  });
  res.end(text);
}

/** The bearer token of a request, undefined when absent. */
export function bearerToken(req: IncomingMessage): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  return m?.[1];
}

/** A single-valued header, undefined when absent or empty. */
export function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name.toLowerCase()];
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s === '' ? undefined : s;
}
