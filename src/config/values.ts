/** The zod parsers of single variables' values (numbers, lists, addresses) the environment schema is made of. */
import { z } from 'zod';
import { MerchantId } from '../domain/payment';

export const wholeNumber = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, { message: 'must be a whole number' })
    .transform(Number)
    .pipe(
      z
        .number()
        .int()
        .min(min, { message: `must be at least ${min}` })
        .max(max, { message: `must be at most ${max}` }),
    );
export const port = wholeNumber(0, 65_535);
export const ms = wholeNumber(1, Number.MAX_SAFE_INTEGER);
export const boolean = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'must be true or false' })
  .transform((v) => v === 'true' || v === '1' || v === 'yes');
export const msList = z
  .string()
  .transform((v) => v.split(',').map((part) => part.trim()))
  .pipe(
    z
      .array(z.string().regex(/^\d+$/, { message: 'must be a comma-separated list of whole milliseconds' }))
      .min(1)
      .transform((parts) => parts.map(Number)),
  )
  .pipe(z.array(z.number().int().positive({ message: 'every delay must be positive' })));
export const hostPort = z
  .string()
  .regex(/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, { message: 'must be host:port' });
export const nonEmpty = z.string().min(1);
export const secret = z.string().min(8, { message: 'must be at least 8 characters' });

/** `m1,m2`: merchant ids, comma separated. */
export const merchantList = z
  .string()
  .transform((v) =>
    v
      .split(',')
      .map((part) => part.trim())
      .filter((part) => part.length > 0),
  )
  .pipe(z.array(MerchantId));

/** `http://127.0.0.1:8233,http://localhost:8233`: browser origins (scheme://host[:port]), comma separated. */
export const originList = z
  .string()
  .transform((v) =>
    v
      .split(',')
      .map((part) => part.trim())
      .filter((part) => part.length > 0),
  )
  .pipe(
    z.array(z.string().regex(/^https?:\/\/[^/\s]+$/, { message: 'each origin must be scheme://host[:port], no path' })),
  );

/** `host:port` to listen on, or `off`. */
export const listenAddress = z.union([z.literal('off'), hostPort]);
