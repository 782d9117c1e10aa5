import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { startStubApi, stubClient } from './stub';
import { ApiErrorType } from '../../src/domain/api-schemas';
import { validateOpenApi } from './validate-openapi';

let api: { app: FastifyInstance; url: string };

beforeAll(async () => {
  api = await startStubApi(stubClient({}));
});
afterAll(() => api.app.close());

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, { security?: unknown[]; responses: Record<string, unknown> }>>;
  components: { securitySchemes: Record<string, unknown> };
  security: unknown[];
};

const fetchDoc = async (): Promise<Doc> => (await (await fetch(`${api.url}/openapi.json`)).json()) as Doc;

describe('GET /openapi.json', () => {
  it('is a valid OpenAPI document (swagger-parser)', async () => {
    const doc = await fetchDoc();

    await expect(validateOpenApi(doc)).resolves.toBeUndefined();
    expect(doc.openapi).toBe('3.1.0');
    await expect(validateOpenApi({ openapi: '3.1.0', paths: { '/x': { get: { responses: 'no' } } } })).rejects.toThrow(
      /invalid OpenAPI/,
    );
  });

  it('documents every endpoint of the payments API (docs/http-api.md)', async () => {
    const doc = await fetchDoc();
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );

    expect(operations.sort()).toEqual(
      [
        'POST /v1/payments',
        'GET /v1/payments',
        'GET /v1/payments/{key}',
        'POST /v1/payments/{key}/capture',
        'POST /v1/payments/{key}/refunds',
        'POST /v1/payments/{key}/resolve',
        'GET /v1/review-items',
        'POST /v1/review-items/{id}/resolve',
        'POST /webhooks/{provider}',
        'POST /v1/wallets/{walletId}/credits',
        'GET /v1/wallets/{walletId}',
        'GET /v1/wallets/{walletId}/entries',
        'PUT /v1/webhook-endpoint',
        'GET /v1/webhook-endpoint',
        'DELETE /v1/webhook-endpoint',
        'GET /healthz',
        'GET /openapi.json',
        'GET /metrics',
        'POST /codec/encode',
        'POST /codec/decode',
      ].sort(),
    );
  });

  it('declares bearer auth, lifted only for health, the document itself and signed webhooks', async () => {
    const doc = await fetchDoc();

    expect(doc.components.securitySchemes).toEqual({ bearerAuth: { type: 'http', scheme: 'bearer' } });
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    expect(doc.paths['/healthz']?.get?.security).toEqual([]);
    expect(doc.paths['/webhooks/{provider}']?.post?.security).toEqual([]);
    expect(doc.paths['/v1/payments']?.post?.security).toBeUndefined();
  });

  it('documents the answers of POST /v1/payments, including 202, 400 and 422', async () => {
    const doc = await fetchDoc();

    expect(Object.keys(doc.paths['/v1/payments']?.post?.responses ?? {})).toEqual(
      expect.arrayContaining(['200', '202', '400', '401', '422']),
    );
  });

  it('declares the response headers as header objects: Request-Id always, Location on 202, replay and Retry-After', async () => {
    const doc = (await fetchDoc()) as unknown as {
      components: { headers: Record<string, { schema: unknown }> };
      paths: Record<
        string,
        Record<string, { responses: Record<string, { headers?: Record<string, { $ref: string }> }> }>
      >;
    };
    expect(Object.keys(doc.components.headers).sort()).toEqual(
      ['IdempotentReplayed', 'Location', 'RequestId', 'RetryAfter'].sort(),
    );
    const post = doc.paths['/v1/payments']?.post?.responses ?? {};
    expect(post['202']?.headers).toEqual({
      'Request-Id': { $ref: '#/components/headers/RequestId' },
      Location: { $ref: '#/components/headers/Location' },
      'Idempotent-Replayed': { $ref: '#/components/headers/IdempotentReplayed' },
    });
    expect(Object.keys(post['200']?.headers ?? {}).sort()).toEqual(['Idempotent-Replayed', 'Request-Id']);
    expect(Object.keys(post['503']?.headers ?? {}).sort()).toEqual(['Request-Id', 'Retry-After']);
    expect(Object.keys(post['400']?.headers ?? {})).toEqual(['Request-Id']);
    const capture = doc.paths['/v1/payments/{key}/capture']?.post?.responses ?? {};
    expect(capture['202']?.headers?.Location).toBeDefined();
    // A read has no Idempotency-Key, so no replay header.
    expect(Object.keys(doc.paths['/v1/payments/{key}']?.get?.responses['200']?.headers ?? {})).toEqual(['Request-Id']);
  });

  it('lists every error type: each error answer names the error.type values it carries', async () => {
    const doc = (await fetchDoc()) as unknown as {
      paths: Record<string, Record<string, { responses: Record<string, { 'x-error-types'?: string[] }> }>>;
    };
    const listed = new Set<string>();
    for (const ops of Object.values(doc.paths)) {
      for (const op of Object.values(ops)) {
        for (const [status, r] of Object.entries(op.responses)) {
          if (Number(status) >= 400)
            expect({ status, types: r['x-error-types'] }).toEqual({ status, types: expect.any(Array) });
          for (const t of r['x-error-types'] ?? []) listed.add(t);
        }
      }
    }
    expect([...listed].sort()).toEqual([...ApiErrorType.options].sort());
    const capture = doc.paths['/v1/payments/{key}/capture']?.post?.responses ?? {};
    expect(capture['422']?.['x-error-types']).toEqual([
      'idempotency_key_reused',
      'amount_exceeded',
      'provider_rejected',
    ]);
    expect(Object.keys(capture)).toEqual(expect.arrayContaining(['409', '413', '415', '422', '500', '503']));
  });

  it('carries the field descriptions written with .describe() in the zod schemas', async () => {
    const doc = (await fetchDoc()) as unknown as {
      paths: Record<string, Record<string, { parameters?: { name: string; in: string; description?: string }[] }>>;
    };
    const params = doc.paths['/v1/payments']?.post?.parameters ?? [];
    const key = params.find((p) => p.in === 'header' && p.name.toLowerCase() === 'idempotency-key');
    expect(key?.description).toMatch(/printable ASCII/);
  });

  it('cites nothing outside the repository: its description points at docs/http-api.md', async () => {
    const doc = (await fetchDoc()) as unknown as { info: { description: string } };
    expect(doc.info.description).not.toMatch(/CONTRACTS\.md/);
    expect(doc.info.description).toContain('docs/http-api.md');
  });

  it('lists per operation only the error types it can answer: no amount_exceeded or invalid_transition for a charge', async () => {
    const doc = (await fetchDoc()) as unknown as {
      paths: Record<string, Record<string, { responses: Record<string, { 'x-error-types'?: string[] }> }>>;
    };
    const charge = doc.paths['/v1/payments']?.post?.responses ?? {};
    expect(charge['422']?.['x-error-types']).toEqual(['idempotency_key_reused']);
    expect(charge['409']?.['x-error-types']).toEqual(['payment_in_flight']);
    const refund = doc.paths['/v1/payments/{key}/refunds']?.post?.responses ?? {};
    expect(refund['409']?.['x-error-types']).toEqual(['invalid_transition', 'operation_in_flight']);
    const resolve = doc.paths['/v1/payments/{key}/resolve']?.post?.responses ?? {};
    expect(resolve['409']?.['x-error-types']).toEqual(['invalid_transition']);
    // invalid_signature is a webhook's answer only.
    expect(charge['400']?.['x-error-types']).toEqual(['validation_error']);
    expect(doc.paths['/webhooks/{provider}']?.post?.responses['400']?.['x-error-types']).toEqual([
      'validation_error',
      'invalid_signature',
    ]);
  });

  it('gives the Idempotency-Key header and the key path parameter their length and pattern', async () => {
    const doc = (await fetchDoc()) as unknown as {
      paths: Record<
        string,
        Record<
          string,
          { parameters?: { name: string; in: string; required?: boolean; schema?: Record<string, unknown> }[] }
        >
      >;
    };
    const expected = { type: 'string', minLength: 1, maxLength: 255, pattern: expect.any(String) };
    for (const [route, method] of [
      ['/v1/payments', 'post'],
      ['/v1/payments/{key}/capture', 'post'],
      ['/v1/payments/{key}/refunds', 'post'],
    ] as const) {
      const header = doc.paths[route]?.[method]?.parameters?.find(
        (p) => p.in === 'header' && p.name.toLowerCase() === 'idempotency-key',
      );
      expect({ route, required: header?.required, schema: header?.schema }).toEqual({
        route,
        required: true,
        schema: expect.objectContaining(expected),
      });
      const pattern = new RegExp(String(header?.schema?.pattern));
      expect([pattern.test('k'.repeat(255)), pattern.test(' leading'), pattern.test('tab\tkey')]).toEqual([
        true,
        false,
        false,
      ]);
    }
    const key = doc.paths['/v1/payments/{key}']?.get?.parameters?.find((p) => p.in === 'path' && p.name === 'key');
    expect(key?.schema).toEqual(expect.objectContaining(expected));
  });

  it('every query parameter of the document is named in docs/http-api.md', async () => {
    const doc = (await fetchDoc()) as unknown as {
      paths: Record<string, Record<string, { parameters?: { name: string; in: string }[] }>>;
    };
    const page = readFileSync(path.join(__dirname, '..', '..', 'docs', 'http-api.md'), 'utf8');
    for (const [route, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        for (const p of op.parameters ?? []) {
          if (p.in !== 'query') continue;
          const documented = page
            .split('\n')
            .some((line) => line.includes(route.replace(/\{(\w+)\}/g, ':$1')) && line.includes(`${p.name}=`));
          expect({ operation: `${method.toUpperCase()} ${route}`, query: p.name, documented }).toEqual({
            operation: `${method.toUpperCase()} ${route}`,
            query: p.name,
            documented: true,
          });
        }
      }
    }
  });
});
